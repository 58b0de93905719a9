// Package imageinventory runs the real berth-agent against the real containerd of the local
// cluster's real node and checks the NodeImages object it publishes: the same images and
// digests `ctr -n k8s.io images ls` shows, an imported image added, a removed one removed, a
// vanished socket reported Stale with the inventory kept. It also proves, against the real API
// server, that the chart's ValidatingAdmissionPolicy lets an agent write only its own node's
// NodeImages (identity from the pod-bound service-account token). Needs root (real node).
package imageinventory

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	e2eimages "github.com/berth-sched/berth/e2e/images"
	agentimages "github.com/berth-sched/berth/pkg/agent/images"
	"github.com/berth-sched/berth/pkg/imageref"
)

const (
	realNode  = "berth-real"
	release   = "berth"
	agentNS   = "berth-system"
	agentSA   = "berth-agent" // the chart's agent account for release "berth"
	preloaded = "localhost/berth-e2e/preloaded:v1"
	imported  = "localhost/berth-e2e/imported:v1"
)

func TestImageInventory(t *testing.T) {
	framework.NeedRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := cluster.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "berth-agent")); err != nil {
		t.Fatalf("%v: run `make build`", err)
	}
	tmp := t.TempDir()
	preTar := writeImage(t, tmp, preloaded)
	c, err := cluster.Start(ctx, cluster.Config{
		// Only pause and one small image of ours: the inventory compared with ctr is the whole node.
		// Two nodes: the chart's DaemonSet serves both with one agent.criSocket ($(NODE_NAME)).
		RealNode: &cluster.RealNodeConfig{NodeName: realNode, Count: 2, Images: []string{preTar}},
		// The default scheduler places the chart's DaemonSet pod; KWOK is not needed (the other
		// nodes only exist for token binding).
		WithoutKWOK: true,
		Logf:        t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	rn := c.RealNode()
	installNodeImagesCRD(ctx, t, c)
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: "node-a"}, cluster.NodeSpec{Name: "node-b"}); err != nil {
		t.Fatal(err)
	}
	applyChartInventoryObjects(ctx, t, c)

	t.Run("the admission policy lets an agent write only its own node's NodeImages", func(t *testing.T) {
		testPolicy(ctx, t, c)
	})
	t.Run("the API server stores the largest inventory the agent publishes", func(t *testing.T) {
		testLargest(ctx, t, c)
	})
	t.Run("the real agent publishes what containerd holds, follows changes, keeps it when the socket goes", func(t *testing.T) {
		testRealAgent(ctx, t, c, rn, tmp)
	})
	t.Run("the chart's agent DaemonSet publishes each real node's own images from its pod, one criSocket value with $(NODE_NAME) for both", func(t *testing.T) {
		testDaemonSet(ctx, t, c, tmp)
	})
}

// testDaemonSet runs the chart's agent DaemonSet on both real nodes with agent.criSocket at
// the local cluster's per-node template: each pod reaches its own node's containerd through the
// read-only directory mount the kubelet picks for it (subPathExpr), and writes its node's
// NodeImages with the kubelet's projected token, through the policy. An image imported into the
// second node alone shows that neither agent read the other's runtime.
func testDaemonSet(ctx context.Context, t *testing.T, c *cluster.Cluster, tmp string) {
	agentTar := filepath.Join(c.BinDir, "images", "berth-agent.tar")
	if _, err := os.Stat(agentTar); err != nil {
		t.Fatalf("%v: run `make images`", err)
	}
	nodes := c.RealNodes()
	if len(nodes) < 2 {
		t.Fatalf("%d real nodes, want 2", len(nodes))
	}
	const onlySecond = "localhost/berth-e2e/second-node-only:v1"
	if _, err := nodes[1].Ctr(ctx, "images", "import", writeImage(t, tmp, onlySecond)); err != nil {
		t.Fatal(err)
	}
	admin := dynamic.NewForConfigOrDie(c.RESTConfig).Resource(agentimages.GVR)
	var names []any
	for _, rn := range nodes {
		if _, err := rn.Ctr(ctx, "images", "import", agentTar); err != nil {
			t.Fatal(err)
		}
		// ctr-imported images carry only their tag; name them by digest too, as a CRI pull
		// does (the first node's were named so by the previous test already).
		for _, w := range ctrImages(ctx, t, rn) {
			addDigestRef(ctx, t, rn, w)
		}
		// The host-run agent of the previous test is stopped; start from no object, so the one
		// that appears is the pod's.
		if err := admin.Delete(ctx, rn.NodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		names = append(names, rn.NodeName)
	}
	r, err := chart.Render(release, agentNS, map[string]any{"agent": map[string]any{
		"criSocket": cluster.CRISocketTemplate(c.Dir), "imageInterval": "500ms", "reportInterval": "1h",
		"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{
				"key": "kubernetes.io/hostname", "operator": "In", "values": names}}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var created bool
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" || o.GetName() != agentSA {
			continue
		}
		if _, err := dynamic.NewForConfigOrDie(c.RESTConfig).Resource(appsv1.SchemeGroupVersion.WithResource("daemonsets")).Namespace(agentNS).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		created = true
	}
	if !created {
		t.Fatal("the chart renders no agent DaemonSet")
	}
	store := agentimages.DynamicStore{Client: dynamic.NewForConfigOrDie(c.RESTConfig)}
	for i, rn := range nodes {
		want := ctrImages(ctx, t, rn)
		if has := slices.ContainsFunc(want, func(w ctrImage) bool { return w.ref == onlySecond }); has != (i == 1) {
			t.Fatalf("%s holds %s: %v (only the second node should)", rn.NodeName, onlySecond, has)
		}
		obj := waitInventoryOf(ctx, t, store, rn.NodeName, "inventory published by the DaemonSet's pod on "+rn.NodeName, func(o *berthv1alpha1.NodeImages) error {
			if o == nil {
				return fmt.Errorf("no NodeImages yet (%s)", daemonSetState(ctx, c, rn.NodeName))
			}
			if c := condition(o, berthv1alpha1.NodeImagesConditionReady); c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Ready %+v", c)
			}
			return matches(o, want)
		})
		// The pod's agent, not an administrator, wrote it: the agent account is the field manager's user.
		if len(obj.ManagedFields) == 0 || obj.ManagedFields[0].Manager != berthv1alpha1.NodeImagesFieldManager {
			t.Errorf("%s: managed fields %+v, want manager %s", rn.NodeName, obj.ManagedFields, berthv1alpha1.NodeImagesFieldManager)
		}
	}
}

// daemonSetState says why a node's agent pod has published nothing yet.
func daemonSetState(ctx context.Context, c *cluster.Cluster, node string) string {
	pods, _ := c.Client.CoreV1().Pods(agentNS).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	var st []string
	for _, p := range pods.Items {
		st = append(st, p.Name+" "+string(p.Status.Phase))
	}
	ds, _ := c.Client.AppsV1().DaemonSets(agentNS).Get(ctx, agentSA, metav1.GetOptions{})
	evs, _ := c.Client.CoreV1().Events(agentNS).List(ctx, metav1.ListOptions{})
	var ev []string
	for _, e := range evs.Items {
		ev = append(ev, e.InvolvedObject.Name+" "+e.Reason+": "+e.Message)
	}
	return fmt.Sprintf("agent pods: %v; DaemonSet status %+v; events %v", st, ds.Status, ev)
}

// writeImage builds a small random single-layer image (unique content per run) tagged ref.
func writeImage(t *testing.T, dir, ref string) string {
	t.Helper()
	img, err := random.Image(2048, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	// ctr imports only the host platform's images.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
	if err := e2eimages.Write(path, ref, img); err != nil {
		t.Fatal(err)
	}
	return path
}

func installNodeImagesCRD(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if err := framework.InstallNodeImagesCRD(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
}

// applyChartInventoryObjects creates the agent's namespace and service account and every
// object the chart renders in templates/agent-images.yaml (RBAC, the admission policy and its
// binding), exactly as rendered.
func applyChartInventoryObjects(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	r, err := chart.Render(release, agentNS, map[string]any{"agent": map[string]any{"criSocket": "/run/containerd/containerd.sock"}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, d := range strings.Split(r.Manifest, "\n---") {
		if strings.Contains(d, "# Source: berth/templates/agent-images.yaml") {
			docs = append(docs, d)
		}
	}
	objs, err := chart.Objects(strings.Join(docs, "\n---"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
	}
	for _, k := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if !kinds[k] {
			t.Fatalf("the chart's agent-images template renders no %s (got %v)", k, kinds)
		}
	}
	if err := framework.EnsureNamespace(ctx, c.Client, agentNS); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ServiceAccounts(agentNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentSA}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(c.RESTConfig)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	for _, o := range objs {
		m, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := o.GetNamespace(); ns != "" {
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// agentPod is the agent's pod on node (bound directly, as a DaemonSet's pod is); tokens bound to
// it carry the node's name.
func agentPod(ctx context.Context, t *testing.T, c *cluster.Cluster, name, node string) *corev1.Pod {
	t.Helper()
	never := false
	pod, err := c.Client.CoreV1().Pods(agentNS).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agentNS},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: agentSA, AutomountServiceAccountToken: &never,
			Containers:  []corev1.Container{{Name: "agent", Image: cluster.PauseImage, ImagePullPolicy: corev1.PullNever}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// token mints a token of the agent account, bound to pod when it is not nil (as the kubelet's
// projected token is), else bound to nothing.
func token(ctx context.Context, t *testing.T, c *cluster.Cluster, pod *corev1.Pod) string {
	t.Helper()
	exp := int64(3600)
	spec := authnv1.TokenRequestSpec{ExpirationSeconds: &exp}
	if pod != nil {
		spec.BoundObjectRef = &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := c.Client.CoreV1().ServiceAccounts(agentNS).CreateToken(ctx, agentSA, &authnv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func tokenConfig(c *cluster.Cluster, tok string) *rest.Config {
	rc := rest.AnonymousClientConfig(c.RESTConfig)
	rc.BearerToken = tok
	return rc
}

func storeAs(c *cluster.Cluster, tok string) agentimages.DynamicStore {
	return agentimages.DynamicStore{Client: dynamic.NewForConfigOrDie(tokenConfig(c, tok))}
}

func nodeImages(name string, images ...berthv1alpha1.NodeImage) *berthv1alpha1.NodeImages {
	return &berthv1alpha1.NodeImages{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: berthv1alpha1.NodeImagesSpec{NodeName: name, Images: images}}
}

func testPolicy(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	podA, podB := agentPod(ctx, t, c, "agent-a", "node-a"), agentPod(ctx, t, c, "agent-b", "node-b")
	a, b, unbound := storeAs(c, token(ctx, t, c, podA)), storeAs(c, token(ctx, t, c, podB)), storeAs(c, token(ctx, t, c, nil))
	admin := agentimages.DynamicStore{Client: dynamic.NewForConfigOrDie(c.RESTConfig)}
	img := berthv1alpha1.NodeImage{ID: "sha256:aa", Tags: []string{"docker.io/library/nginx:1.16"}, SizeBytes: 1}

	// The policy is live once the API server refuses what it forbids; until then (a second or
	// so after creation) writes pass on RBAC alone, so probe with an object nobody else uses.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := b.Create(ctx, nodeImages("node-probe"))
		if err == nil {
			_ = dynamic.NewForConfigOrDie(c.RESTConfig).Resource(agentimages.GVR).Delete(ctx, "node-probe", metav1.DeleteOptions{})
			return false, nil
		}
		return apierrors.IsForbidden(err), nil
	})
	if err != nil {
		t.Fatalf("the admission policy never took effect: %v", err)
	}

	created, err := a.Create(ctx, nodeImages("node-a", img))
	if err != nil {
		t.Fatalf("agent of node-a creating its own NodeImages: %v", err)
	}
	cases := []struct {
		name    string
		write   func() error
		allowed bool
		msg     string
	}{
		{"agent of node-a updates its own", func() error {
			o := created.DeepCopy()
			o.Spec.Images = append(o.Spec.Images, berthv1alpha1.NodeImage{ID: "sha256:bb", SizeBytes: 2})
			u, err := a.Update(ctx, o)
			if err == nil {
				created = u
			}
			return err
		}, true, ""},
		{"agent of node-a updates its own status", func() error {
			o := created.DeepCopy()
			o.Status.ImageCount = 2
			u, err := a.UpdateStatus(ctx, o)
			if err == nil {
				created = u
			}
			return err
		}, true, ""},
		{"agent of node-b overwrites node-a's images", func() error {
			o := created.DeepCopy()
			o.Spec.Images = nil
			_, err := b.Update(ctx, o)
			return err
		}, false, "the agent of node node-b may write only NodeImages node-b, not node-a"},
		{"agent of node-b marks node-a's inventory stale", func() error {
			o := created.DeepCopy()
			meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: "Stale", Status: metav1.ConditionTrue, Reason: "Forged", Message: "x"})
			_, err := b.UpdateStatus(ctx, o)
			return err
		}, false, "may write only NodeImages node-b, not node-a"},
		{"agent of node-b creates another node's object", func() error {
			_, err := b.Create(ctx, nodeImages("node-c", img))
			return err
		}, false, "may write only NodeImages node-b, not node-c"},
		{"agent token bound to no pod", func() error {
			_, err := unbound.Create(ctx, nodeImages("node-b", img))
			return err
		}, false, "carries no node"},
		{"agent of node-b creates its own", func() error {
			_, err := b.Create(ctx, nodeImages("node-b", img))
			return err
		}, true, ""},
		// why: the policy binds the agent account only; administrators and other controllers
		// are governed by RBAC as usual.
		{"an administrator edits node-a's", func() error {
			o, err := admin.Get(ctx, "node-a")
			if err != nil {
				return err
			}
			o.Spec.Images = append(o.Spec.Images, berthv1alpha1.NodeImage{ID: "sha256:cc", SizeBytes: 3})
			_, err = admin.Update(ctx, o)
			return err
		}, true, ""},
	}
	for _, tc := range cases {
		framework.CheckPolicyWrite(t, tc.name, tc.write, tc.allowed, tc.msg)
	}
	// The refused writes changed nothing.
	got, err := admin.Get(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Images) != 3 || meta.FindStatusCondition(got.Status.Conditions, "Stale") != nil {
		t.Errorf("node-a's NodeImages after refused writes: %d images, conditions %+v", len(got.Spec.Images), got.Status.Conditions)
	}
}

// ctrImage is one `ctr -n k8s.io images ls` line: a reference and its manifest digest.
type ctrImage struct{ ref, digest string }

func ctrImages(ctx context.Context, t *testing.T, rn *cluster.RealNode) []ctrImage {
	t.Helper()
	out, err := rn.Ctr(ctx, "images", "ls")
	if err != nil {
		t.Fatal(err)
	}
	var imgs []ctrImage
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 3 {
			continue // header: REF TYPE DIGEST SIZE PLATFORMS LABELS
		}
		// The CRI plugin also names images by ID (sha256:…) and by digest; the tags are what
		// users import and pods name.
		if strings.HasPrefix(f[0], "sha256:") || strings.Contains(f[0], "@") {
			continue
		}
		imgs = append(imgs, ctrImage{ref: f[0], digest: f[2]})
	}
	return imgs
}

// describe lists an inventory as "tag digest" lines for messages.
func describe(obj *berthv1alpha1.NodeImages) string {
	if obj == nil {
		return "<none>"
	}
	var s []string
	for _, i := range obj.Spec.Images {
		s = append(s, fmt.Sprintf("%s %v %v", i.ID, i.Tags, i.Digests))
	}
	return strings.Join(s, "; ")
}

// matches says whether the inventory holds exactly containerd's tagged images, each with its
// manifest digest on the same image.
func matches(obj *berthv1alpha1.NodeImages, want []ctrImage) error {
	if obj == nil {
		return fmt.Errorf("no NodeImages")
	}
	byTag := map[string]berthv1alpha1.NodeImage{}
	digests := map[string]bool{}
	for _, i := range obj.Spec.Images {
		for _, tag := range i.Tags {
			byTag[tag] = i
		}
		for _, d := range i.Digests {
			digests[d] = true
		}
	}
	var problems []string
	for _, w := range want {
		r, err := imageref.Normalize(w.ref)
		if err != nil {
			return err
		}
		i, ok := byTag[r.Tagged()]
		if !ok {
			problems = append(problems, "missing "+r.Tagged())
			continue
		}
		dig := r.Name + "@" + w.digest
		found := false
		for _, d := range i.Digests {
			found = found || d == dig
		}
		if !found {
			problems = append(problems, fmt.Sprintf("%s lacks digest %s (has %v)", r.Tagged(), dig, i.Digests))
		}
		delete(digests, dig)
		if i.SizeBytes <= 0 {
			problems = append(problems, fmt.Sprintf("%s size %d", r.Tagged(), i.SizeBytes))
		}
		delete(byTag, r.Tagged())
	}
	for tag := range byTag {
		problems = append(problems, "extra "+tag)
	}
	for d := range digests {
		problems = append(problems, "extra "+d)
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// waitInventory polls the node's NodeImages until ok accepts it.
func waitInventory(ctx context.Context, t *testing.T, store agentimages.DynamicStore, what string, ok func(*berthv1alpha1.NodeImages) error) *berthv1alpha1.NodeImages {
	t.Helper()
	return waitInventoryOf(ctx, t, store, realNode, what, ok)
}

// waitInventoryOf waits until node's NodeImages (nil while there is none) passes ok.
func waitInventoryOf(ctx context.Context, t *testing.T, store agentimages.DynamicStore, node, what string, ok func(*berthv1alpha1.NodeImages) error) *berthv1alpha1.NodeImages {
	t.Helper()
	var last *berthv1alpha1.NodeImages
	var lastErr error
	// why: a minute, not 30 s: a pod on a fresh node starts its image pull of the agent first.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		obj, err := store.Get(ctx, node)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err == nil {
			last = obj
		} else {
			last = nil
		}
		lastErr = ok(last)
		return lastErr == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v; last inventory: %s", what, lastErr, describe(last))
	}
	return last
}

func condition(obj *berthv1alpha1.NodeImages, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(obj.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func testRealAgent(ctx context.Context, t *testing.T, c *cluster.Cluster, rn *cluster.RealNode, tmp string) {
	pod := agentPod(ctx, t, c, "agent-real", realNode)
	tok := token(ctx, t, c, pod)
	dir := filepath.Join(tmp, "agent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The agent reads containerd's real socket through a link the test can take away (stopping
	// containerd would take the node's pods and the harness's teardown with it).
	link := filepath.Join(dir, "cri.sock")
	if err := os.Symlink(rn.ContainerdSocket, link); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthority: c.PKI.CACert}
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: tok}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "agent"}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	// The agent runs in the cluster's network namespace; its load part is not under test here,
	// so its first report is due after the test (and would go to a closed port).
	const watcherURL = "http://[::1]:9"
	// ctr-imported images carry only their tag; a CRI pull also names the image by digest.
	// Name them the same way, so the runtime reports digests as on a pulled image.
	for _, w := range ctrImages(ctx, t, rn) {
		addDigestRef(ctx, t, rn, w)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := c.StartComponent(ctx, cluster.ProcessSpec{Name: "berth-agent-images", Binary: filepath.Join(c.BinDir, "berth-agent"), Args: []string{
		"--node-name=" + realNode, "--kubeconfig=" + kc, "--watch-pods=false", "--watcher-url=" + watcherURL,
		"--token-file=" + tokenFile, "--listen=" + addr, "--sample-interval=200ms", "--report-interval=1h",
		"--cri-socket=" + link, "--image-interval=300ms", "-v=2",
	}}, cluster.HTTPCheck("http://"+addr+"/readyz"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.StopComponent(p)
	store := agentimages.DynamicStore{Client: dynamic.NewForConfigOrDie(c.RESTConfig)}

	t.Run("publishes containerd's images with their digests, owned by the node", func(t *testing.T) {
		want := ctrImages(ctx, t, rn)
		refs := map[string]bool{}
		for _, w := range want {
			refs[w.ref] = true
		}
		if !refs[preloaded] || !refs[cluster.PauseImage] {
			t.Fatalf("ctr lists %v; want at least %s and %s", want, preloaded, cluster.PauseImage)
		}
		obj := waitInventory(ctx, t, store, "inventory equal to ctr images ls", func(o *berthv1alpha1.NodeImages) error { return matches(o, want) })
		node, err := c.Client.CoreV1().Nodes().Get(ctx, realNode, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(obj.OwnerReferences) != 1 || obj.OwnerReferences[0].UID != node.UID || obj.OwnerReferences[0].Kind != "Node" {
			t.Errorf("owner references %+v, want the Node %s (%s)", obj.OwnerReferences, realNode, node.UID)
		}
		obj = waitInventory(ctx, t, store, "Ready status", func(o *berthv1alpha1.NodeImages) error {
			if c := condition(o, berthv1alpha1.NodeImagesConditionReady); c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Ready %+v", c)
			}
			return nil
		})
		if obj.Status.ImageCount != int32(len(obj.Spec.Images)) || obj.Status.TotalSizeBytes <= 0 || obj.Status.ObservedTime.IsZero() {
			t.Errorf("status %+v does not summarise %d images", obj.Status, len(obj.Spec.Images))
		}
	})

	t.Run("an imported image appears, a removed one disappears", func(t *testing.T) {
		tar := writeImage(t, tmp, imported)
		if _, err := rn.Ctr(ctx, "images", "import", tar); err != nil {
			t.Fatal(err)
		}
		for _, w := range ctrImages(ctx, t, rn) {
			if w.ref == imported {
				addDigestRef(ctx, t, rn, w)
			}
		}
		want := ctrImages(ctx, t, rn)
		obj := waitInventory(ctx, t, store, "inventory with the imported image", func(o *berthv1alpha1.NodeImages) error { return matches(o, want) })
		var id string
		for _, i := range obj.Spec.Images {
			if len(i.Tags) == 1 && i.Tags[0] == imported {
				id = i.ID
			}
		}
		refs := []string{imported}
		for _, w := range ctrImagesAll(ctx, t, rn) {
			// The CRI plugin may have named the image by ID or digest too; remove them all.
			if w.digest == digestOf(want, imported) && w.ref != imported {
				refs = append(refs, w.ref)
			}
		}
		if _, err := rn.Ctr(ctx, append([]string{"images", "rm"}, refs...)...); err != nil {
			t.Fatal(err)
		}
		want = ctrImages(ctx, t, rn)
		waitInventory(ctx, t, store, "inventory without the removed image", func(o *berthv1alpha1.NodeImages) error {
			for _, i := range o.Spec.Images {
				if i.ID == id {
					return fmt.Errorf("image %s still listed", id)
				}
			}
			return matches(o, want)
		})
	})

	t.Run("a vanished socket keeps the inventory, reports Stale and an event; its return recovers", func(t *testing.T) {
		before, err := store.Get(ctx, realNode)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		obj := waitInventory(ctx, t, store, "Stale=True", func(o *berthv1alpha1.NodeImages) error {
			if c := condition(o, berthv1alpha1.NodeImagesConditionStale); c.Status != metav1.ConditionTrue || c.Reason != agentimages.ReasonSocketMissing {
				return fmt.Errorf("Stale %+v", c)
			}
			return nil
		})
		if agentimages.Hash(obj.Spec.Images) != agentimages.Hash(before.Spec.Images) {
			t.Errorf("inventory changed while the runtime was unreachable: %s", describe(obj))
		}
		if c := condition(obj, berthv1alpha1.NodeImagesConditionReady); c.Status != metav1.ConditionFalse || c.Reason != agentimages.ReasonSocketMissing {
			t.Errorf("Ready %+v, want False/%s", c, agentimages.ReasonSocketMissing)
		}
		if !obj.Status.ObservedTime.Equal(&before.Status.ObservedTime) {
			t.Errorf("observedTime moved from %v to %v without a listing", before.Status.ObservedTime, obj.Status.ObservedTime)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
				"involvedObject.kind": "NodeImages", "involvedObject.name": realNode, "reason": agentimages.ReasonSocketMissing}.String()})
			return err == nil && len(evs.Items) > 0 && evs.Items[0].Type == corev1.EventTypeWarning, nil
		})
		if err != nil {
			t.Errorf("no Warning event %s on NodeImages %s: %v", agentimages.ReasonSocketMissing, realNode, err)
		}
		page := get(ctx, t, "http://"+addr+"/metrics")
		if !strings.Contains(page, `berth_agent_image_list_errors_total{reason="SocketMissing"}`) || !strings.Contains(page, "berth_agent_image_inventory_stale 1") {
			t.Errorf("metrics do not show the failure:\n%s", grep(page, "berth_agent_image"))
		}
		// why: a wrong or unreachable socket must fail the agent's readiness (and so the
		// DaemonSet's rollout and helm install, issue 20), naming the socket; the load reports
		// are pushed whatever the readiness.
		if body := get(ctx, t, "http://"+addr+"/readyz"); !strings.Contains(body, "images: SocketMissing: CRI socket "+link) {
			t.Errorf("/readyz %q while the CRI is unreachable, want it to name the socket", body)
		}

		if err := os.Symlink(rn.ContainerdSocket, link); err != nil {
			t.Fatal(err)
		}
		waitInventory(ctx, t, store, "recovery", func(o *berthv1alpha1.NodeImages) error {
			if c := condition(o, berthv1alpha1.NodeImagesConditionStale); c.Status != metav1.ConditionFalse {
				return fmt.Errorf("Stale %+v", c)
			}
			if c := condition(o, berthv1alpha1.NodeImagesConditionReady); c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Ready %+v", c)
			}
			return nil
		})
		if body := get(ctx, t, "http://"+addr+"/readyz"); strings.TrimSpace(body) != "ok" {
			t.Errorf("/readyz %q after the runtime came back, want ok", body)
		}
	})
}

// addDigestRef names img's image also by name@manifest-digest, as a CRI pull does.
func addDigestRef(ctx context.Context, t *testing.T, rn *cluster.RealNode, img ctrImage) {
	t.Helper()
	r, err := imageref.Normalize(img.ref)
	if err != nil {
		t.Fatal(err)
	}
	// why: --force, so naming an image again (a node a previous step prepared) is not an error.
	if _, err := rn.Ctr(ctx, "images", "tag", "--force", img.ref, r.Name+"@"+img.digest); err != nil {
		t.Fatal(err)
	}
}

// ctrImagesAll is every ctr reference, IDs and digests included.
func ctrImagesAll(ctx context.Context, t *testing.T, rn *cluster.RealNode) []ctrImage {
	t.Helper()
	out, err := rn.Ctr(ctx, "images", "ls")
	if err != nil {
		t.Fatal(err)
	}
	var imgs []ctrImage
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); i > 0 && len(f) >= 3 {
			imgs = append(imgs, ctrImage{ref: f[0], digest: f[2]})
		}
	}
	return imgs
}

func digestOf(imgs []ctrImage, ref string) string {
	for _, i := range imgs {
		if i.ref == ref {
			return i.digest
		}
	}
	return ""
}

func get(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grep(page, prefix string) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// testLargest writes, as the agent does, the largest inventories the agent publishes: at its byte
// limit with typical names, and at its count limit with the shortest names (the most managed
// fields per byte of spec). Each stored object, with its managed fields, must fit etcd's request
// limit; the agent's byte limit is what keeps it there.
func testLargest(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	typical := func(i int) *runtimeapi.Image {
		return &runtimeapi.Image{Id: fmt.Sprintf("sha256:%064x", i), Size: uint64(1 << 20),
			RepoTags:    []string{fmt.Sprintf("registry.example.com:5000/team/service-%d:v1.2.3", i), fmt.Sprintf("registry.example.com:5000/team/service-%d:latest", i)},
			RepoDigests: []string{fmt.Sprintf("registry.example.com:5000/team/service-%d@sha256:%064x", i, i)}}
	}
	short := func(i int) *runtimeapi.Image {
		return &runtimeapi.Image{Id: fmt.Sprintf("sha256:%064x", i), Size: 1, RepoTags: []string{fmt.Sprintf("a%d", i)}}
	}
	// why: ~200 bytes of spec per image puts 5000 images right at a spec-only limit, where the
	// managed fields would push the stored object past etcd's.
	medium := func(i int) *runtimeapi.Image {
		return &runtimeapi.Image{Id: fmt.Sprintf("sha256:%064x", i), Size: 1, RepoTags: []string{fmt.Sprintf("registry.example.com/some-team/some-service-%06d:v1", i)}}
	}
	for _, tc := range []struct {
		name string
		gen  func(int) *runtimeapi.Image
	}{{"typical names", typical}, {"shortest names", short}, {"medium names", medium}} {
		t.Run(tc.name, func(t *testing.T) {
			var raw []*runtimeapi.Image
			for i := range berthv1alpha1.NodeImagesMaxImages {
				raw = append(raw, tc.gen(i))
			}
			// The most images, in listing order, that the agent would still publish.
			n := sort.Search(len(raw)+1, func(n int) bool {
				return n > 0 && agentimages.StoredBytes("node-big", agentimages.Build(raw[:n]).Images) > agentimages.DefaultMaxObjectBytes
			}) - 1
			if n > len(raw) {
				n = len(raw)
			}
			inv := agentimages.Build(raw[:n])
			store := agentimages.DynamicStore{Client: dynamic.NewForConfigOrDie(c.RESTConfig)}
			name := "big-" + strings.ReplaceAll(tc.name, " ", "-")
			obj, err := store.Create(ctx, nodeImages(name, inv.Images...))
			if err != nil {
				t.Fatalf("creating %d images (%d bytes of spec): %v", len(inv.Images), agentimages.SpecBytes(name, inv.Images), err)
			}
			obj.Status.ImageCount = int32(len(inv.Images))
			meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Listed", Message: "x"})
			if _, err := store.UpdateStatus(ctx, obj); err != nil {
				t.Fatalf("status of %d images: %v", len(inv.Images), err)
			}
			u, err := dynamic.NewForConfigOrDie(c.RESTConfig).Resource(agentimages.GVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := u.MarshalJSON()
			t.Logf("%s: %d images, %d bytes of spec, %d estimated, %d stored with metadata and managed fields", tc.name, len(inv.Images),
				agentimages.SpecBytes(name, inv.Images), agentimages.StoredBytes(name, inv.Images), len(b))
			// why: the estimate is the agent's only guard; it must not undercount what is stored.
			if len(b) > agentimages.StoredBytes(name, inv.Images)+4096 {
				t.Errorf("stored %d bytes, estimated %d: the estimate undercounts", len(b), agentimages.StoredBytes(name, inv.Images))
			}
			if err := dynamic.NewForConfigOrDie(c.RESTConfig).Resource(agentimages.GVR).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
