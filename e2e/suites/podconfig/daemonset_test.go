package podconfig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/agent/podnet"
)

const agentNS = "berth-system"

// deployChartAgent creates the chart's agent objects (ServiceAccount, ClusterRoles and
// bindings, the PodConfig status admission policy when rendered, DaemonSet) for release
// "berth" with values, pinned to the real node, and waits for its pod to be Ready; it returns
// the pod and a function deleting what it created.
func (e *env) deployChartAgent(t *testing.T, values map[string]any) (*corev1.Pod, func()) {
	t.Helper()
	values = chart.MergeValues(map[string]any{"agent": map[string]any{
		"reportInterval": "1h", "nodeSelector": map[string]any{"kubernetes.io/hostname": realNode}}}, values)
	r, err := chart.Render("berth", agentNS, values)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(e.c.RESTConfig)
	if err := framework.EnsureNamespace(e.ctx, e.c.Client, agentNS); err != nil {
		t.Fatal(err)
	}
	resources := map[string]string{"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "DaemonSet": "daemonsets",
		"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}
	var created []func()
	for _, o := range objs {
		res, ok := resources[o.GetKind()]
		if !ok || o.GetLabels()["app.kubernetes.io/name"] != "berth-agent" || strings.Contains(o.GetName(), "images") {
			continue
		}
		gv, _ := schema.ParseGroupVersion(o.GetAPIVersion())
		ri := dyn.Resource(gv.WithResource(res))
		var rif dynamic.ResourceInterface = ri
		if o.GetNamespace() != "" || res == "serviceaccounts" || res == "daemonsets" {
			rif = ri.Namespace(agentNS)
		}
		if _, err := rif.Create(e.ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		name := o.GetName()
		created = append(created, func() { _ = rif.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	cleanup := func() {
		for i := len(created) - 1; i >= 0; i-- {
			created[i]()
		}
		_ = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := e.c.Client.CoreV1().Pods(agentNS).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, nil
		})
	}
	var pod corev1.Pod
	err = wait.PollUntilContextTimeout(e.ctx, 300*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := e.c.Client.CoreV1().Pods(agentNS).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		pod = pods.Items[0]
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		evs, _ := e.c.Client.CoreV1().Events(agentNS).List(e.ctx, metav1.ListOptions{})
		var ev []string
		for _, x := range evs.Items {
			ev = append(ev, x.InvolvedObject.Name+" "+x.Reason+": "+x.Message)
		}
		// The kubelet's log endpoint needs DNS for the node name; read the log file itself.
		var logs []byte
		_ = filepath.WalkDir(e.c.Dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(p, agentNS+"_"+pod.Name) && strings.HasSuffix(p, ".log") {
				b, _ := os.ReadFile(p)
				logs = append(logs, b[max(0, len(b)-3000):]...)
			}
			return nil
		})
		cleanup()
		t.Fatalf("the chart's agent pod is not Ready: phase %s; events %v; log tail:\n%s", pod.Status.Phase, ev, logs)
	}
	return &pod, cleanup
}

func (e *env) importAgentImage(t *testing.T) {
	t.Helper()
	tar := filepath.Join(e.c.BinDir, "images", "berth-agent.tar")
	if _, err := os.Stat(tar); err != nil {
		t.Fatalf("%v: run `make images`", err)
	}
	if _, err := e.rn.Ctr(e.ctx, "images", "import", tar); err != nil {
		t.Fatal(err)
	}
}

// testLoadOnlyUnprivileged: the chart's default agent (load sampling only) becomes Ready on
// the real node as uid 65532 with every capability dropped: it samples the host's /proc and
// syncs its pod informer with nothing more.
func (e *env) testLoadOnlyUnprivileged(t *testing.T) {
	e.importAgentImage(t)
	pod, cleanup := e.deployChartAgent(t, map[string]any{})
	defer cleanup()
	sc := pod.Spec.Containers[0].SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.Privileged != nil && *sc.Privileged || len(sc.Capabilities.Add) != 0 {
		t.Fatalf("securityContext %+v, want uid 65532, unprivileged, no capability", sc)
	}
	// The process really runs as 65532 with an empty effective capability set.
	out, err := e.rn.Ctr(e.ctx, "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	status := ""
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && pod.Status.ContainerStatuses[0].ContainerID == "containerd://"+f[0] {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%s/status", f[1]))
			if err != nil {
				t.Fatal(err)
			}
			status = string(b)
		}
	}
	if !strings.Contains(status, "Uid:\t65532\t65532\t65532\t65532") || !strings.Contains(status, "CapEff:\t0000000000000000") {
		t.Errorf("agent process status, want uid 65532 and no effective capability:\n%s", status)
	}
}

// testChartPodConfigAgent: the chart's agent with podConfig.enabled (capabilities, not
// privileged) makes the attachments of a fresh PodConfig in the running pods, every status
// write of it passing the chart's admission policy (live before the PodConfig exists), which
// refuses the same identity a write to another node's entry.
func (e *env) testChartPodConfigAgent(t *testing.T) {
	e.deletePodConfig(t)       // a fresh PodConfig, configured by the DaemonSet's agent alone
	e.c.StopComponent(e.agent) // the process agent steps aside for the DaemonSet's
	e.importAgentImage(t)
	// A hostNetwork pod reaches the kubernetes Service's ClusterIP through the route the
	// harness gives the service range in the node's namespace (kube-proxy's OUTPUT DNAT).
	agentPod, cleanup := e.deployChartAgent(t, map[string]any{
		"podConfig": map[string]any{"enabled": true, "clusterCIDRs": []any{"10.244.0.0/16", "10.96.0.0/16"}},
		"agent":     map[string]any{"criSocket": e.rn.ContainerdSocket}})
	defer cleanup()
	e.waitAgentPolicy(t, agentPod)
	if err := e.cl.Create(e.ctx, podConfigObj()); err != nil {
		t.Fatal(err)
	}
	pc := e.waitConfigured(t, "a", "b")
	e.checkInterfaces(t, pc, "a")
	e.exchange(t, pc, "a", "b", "net1", "udp")
	e.exchange(t, pc, "b", "a", "net2", "tcp")
	e.deletePodConfig(t)
}

// waitAgentPolicy waits until the chart's PodConfig status policy refuses the DaemonSet agent's
// identity (its service account, a token bound to its pod on the real node) a write to
// another node's entry, on a probe PodConfig nothing else uses.
func (e *env) waitAgentPolicy(t *testing.T, agentPod *corev1.Pod) {
	t.Helper()
	tr, err := e.c.Client.CoreV1().ServiceAccounts(agentNS).CreateToken(e.ctx, agentPod.Spec.ServiceAccountName, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: agentPod.Name, UID: agentPod.UID}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc := rest.AnonymousClientConfig(e.c.RESTConfig)
	rc.BearerToken = tr.Status.Token
	as := podnet.DynamicStatus{Client: dynamic.NewForConfigOrDie(rc), NodeName: realNode}
	probe := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		// It names no network that exists: the operator refuses it, which the probe does not mind.
		Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{{Name: "net1", Network: "probe"}}}}
	if err := e.cl.Create(e.ctx, probe); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.cl.Delete(context.Background(), probe) }()
	var last error
	err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = as.Apply(ctx, ns, "probe", []berthv1alpha1.PodAttachmentStatus{{Pod: "ghost", Attachment: "net1", Node: "another-node", State: berthv1alpha1.AttachmentConfigured}})
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "the agent of node "+realNode+" may change only status.pods entries of node "+realNode), nil
	})
	if err != nil {
		t.Fatalf("the chart's admission policy never refused the agent a write to another node's entry: %v", last)
	}
}

func (e *env) deletePodConfig(t *testing.T) {
	t.Helper()
	var pc = podConfigObj()
	if err := e.cl.Delete(e.ctx, pc); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(pc), pc)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("PodConfig not gone: %v", err)
	}
}
