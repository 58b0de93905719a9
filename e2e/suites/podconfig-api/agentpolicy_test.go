package podconfigapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/agent/podnet"
	"github.com/berth-sched/berth/pkg/podconfig"
)

const (
	agentNS = "berth-system"
	agentSA = "berth-agent"
)

// installAgentPolicy creates, exactly as the chart renders them with podConfig enabled, the
// agent's ServiceAccount, its ClusterRole and binding (agent.yaml) and every object of
// agent-podconfig.yaml (the ValidatingAdmissionPolicy and its binding).
func (e *env) installAgentPolicy(t *testing.T) {
	t.Helper()
	r, err := chart.Render("berth", agentNS, map[string]any{
		"podConfig": map[string]any{"enabled": true, "clusterCIDRs": []any{"10.244.0.0/16"}},
		"agent":     map[string]any{"criSocket": "/run/containerd/containerd.sock"}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, d := range strings.Split(r.Manifest, "\n---") {
		if strings.Contains(d, "# Source: berth/templates/agent-podconfig.yaml") || strings.Contains(d, "# Source: berth/templates/agent.yaml") {
			docs = append(docs, d)
		}
	}
	objs, err := chart.Objects(strings.Join(docs, "\n---"))
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(e.ctx, e.c.Client, agentNS); err != nil {
		t.Fatal(err)
	}
	resources := map[string]string{"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
		"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}
	kinds := map[string]bool{}
	for _, o := range objs {
		res, ok := resources[o.GetKind()]
		if !ok {
			continue // the DaemonSet: no agent process here, the test writes as the agent
		}
		kinds[o.GetKind()] = true
		gv, _ := schema.ParseGroupVersion(o.GetAPIVersion())
		var ri dynamic.ResourceInterface = e.dyn.Resource(gv.WithResource(res))
		if res == "serviceaccounts" {
			ri = e.dyn.Resource(gv.WithResource(res)).Namespace(agentNS)
		}
		if _, err := ri.Create(e.ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		name := o.GetName()
		t.Cleanup(func() {
			if err := ri.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	if len(kinds) != len(resources) {
		t.Fatalf("the chart rendered %v with podConfig enabled, want every one of %v", kinds, resources)
	}
}

// agentToken mints a token of the agent account bound to a pod of the account on node (as the
// kubelet's projected token is: it carries the node's name), or bound to nothing when node is
// empty.
func (e *env) agentToken(t *testing.T, node string) string {
	t.Helper()
	spec := authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}
	if node != "" {
		pod, err := e.c.Client.CoreV1().Pods(agentNS).Create(e.ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "agent-" + node, Namespace: agentNS},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: agentSA, AutomountServiceAccountToken: ptr.To(false),
				Containers:  []corev1.Container{{Name: "agent", Image: framework.PauseImage}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := e.removePod(context.Background(), pod); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
		spec.BoundObjectRef = &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := e.c.Client.CoreV1().ServiceAccounts(agentNS).CreateToken(e.ctx, agentSA, &authnv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func (e *env) dynAs(tok string) dynamic.Interface {
	rc := rest.AnonymousClientConfig(e.c.RESTConfig)
	rc.BearerToken = tok
	return dynamic.NewForConfigOrDie(rc)
}

// agentEntry is an entry as the agent of its node reports it.
func agentEntry(en berthv1alpha1.PodAttachmentStatus, state berthv1alpha1.AttachmentState) berthv1alpha1.PodAttachmentStatus {
	en.State, en.Interface, en.HostPeer = state, en.Attachment, podconfig.HostPeerName(en.PodUID, en.Attachment)
	en.LastTransitionTime = &metav1.Time{Time: time.Now().UTC().Truncate(time.Second)}
	return en
}

// testAgentPolicy: the chart's ValidatingAdmissionPolicy on the real API server lets each
// agent (its service account, a pod-bound token) change only its own node's status.pods
// entries, whatever kind of write it sends.
func (e *env) testAgentPolicy(t *testing.T) {
	e.installAgentPolicy(t)
	e.network(t, framework.NewPodNetwork("own", "berth-own", "192.168.95.0/24", "192.168.95.1", team("a")))
	e.createPC(t, pcObj(nsA, "own", att("net1", "own")))
	e.createPods(t, nsA, "own", 2, map[string]string{berthv1alpha1.PodConfigLabel: "own"}) // own-0 on n1, own-1 on n2
	pc := e.waitPC(t, nsA, "own", "two Allocated entries", func(pc *berthv1alpha1.PodConfig) bool {
		n := 0
		for _, en := range pc.Status.Pods {
			if en.State == berthv1alpha1.AttachmentAllocated {
				n++
			}
		}
		return n == 2
	})
	byNode := map[string]berthv1alpha1.PodAttachmentStatus{}
	for _, en := range pc.Status.Pods {
		byNode[en.Node] = en
	}
	if byNode["n1"].Pod != "own-0" || byNode["n2"].Pod != "own-1" {
		t.Fatalf("entries %+v, want own-0 on n1 and own-1 on n2", pc.Status.Pods)
	}
	tokN1, tokN2, unbound := e.agentToken(t, "n1"), e.agentToken(t, "n2"), e.agentToken(t, "")
	n1 := podnet.DynamicStatus{Client: e.dynAs(tokN1), NodeName: "n1"}
	n2 := podnet.DynamicStatus{Client: e.dynAs(tokN2), NodeName: "n2"}
	nobody := podnet.DynamicStatus{Client: e.dynAs(unbound), NodeName: "n1"}
	pcs := e.dynAs(tokN1).Resource(berthv1alpha1.GroupVersion.WithResource("podconfigs")).Namespace(nsA)

	// The policy is live once the API server refuses what it forbids; until then writes pass
	// on RBAC alone, so probe with a PodConfig nothing else uses.
	// (It names no network that exists: the operator refuses it, which the probe does not mind.)
	e.createPC(t, pcObj(nsA, "probe", att("net1", "probe")))
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := n1.Apply(ctx, nsA, "probe", []berthv1alpha1.PodAttachmentStatus{{Pod: "ghost", Attachment: "net1", Node: "n2", State: berthv1alpha1.AttachmentConfigured}})
		return apierrors.IsForbidden(err), nil
	})
	if err != nil {
		t.Fatalf("the admission policy never took effect: %v", err)
	}

	mergePatch := func(patch map[string]any) func() error {
		return func() error {
			b, _ := json.Marshal(patch)
			_, err := pcs.Patch(e.ctx, "own", types.MergePatchType, b, metav1.PatchOptions{}, "status")
			return err
		}
	}
	cases := []struct {
		name    string
		write   func() error
		allowed bool
		msg     string
	}{
		{"agent of n1 reports its own entry Configured", func() error {
			return n1.Apply(e.ctx, nsA, "own", []berthv1alpha1.PodAttachmentStatus{agentEntry(byNode["n1"], berthv1alpha1.AttachmentConfigured)})
		}, true, ""},
		{"agent of n2 reports its own entry Configured", func() error {
			return n2.Apply(e.ctx, nsA, "own", []berthv1alpha1.PodAttachmentStatus{agentEntry(byNode["n2"], berthv1alpha1.AttachmentConfigured)})
		}, true, ""},
		{"agent of n1 reports n2's entry Removed", func() error {
			return n1.Apply(e.ctx, nsA, "own", []berthv1alpha1.PodAttachmentStatus{agentEntry(byNode["n1"], berthv1alpha1.AttachmentConfigured),
				agentEntry(byNode["n2"], berthv1alpha1.AttachmentRemoved)})
		}, false, "the agent of node n1 may change only status.pods entries of node n1; this write changes own-1/net1"},
		{"agent of n1 claims n2's entry as its own", func() error {
			en := agentEntry(byNode["n2"], berthv1alpha1.AttachmentFailed)
			en.Node, en.LastError = "n1", "forged"
			return n1.Apply(e.ctx, nsA, "own", []berthv1alpha1.PodAttachmentStatus{agentEntry(byNode["n1"], berthv1alpha1.AttachmentConfigured), en})
		}, false, "this write changes own-1/net1"},
		{"agent of n1 moves its own entry to n2", func() error {
			en := agentEntry(byNode["n1"], berthv1alpha1.AttachmentConfigured)
			en.Node = "n2"
			return n1.Apply(e.ctx, nsA, "own", []berthv1alpha1.PodAttachmentStatus{en})
		}, false, "this write changes own-0/net1"},
		{"agent of n1 invents an entry on n2", func() error {
			return n1.Apply(e.ctx, nsA, "own", []berthv1alpha1.PodAttachmentStatus{agentEntry(byNode["n1"], berthv1alpha1.AttachmentConfigured),
				{Pod: "ghost", Attachment: "net1", Node: "n2", State: berthv1alpha1.AttachmentConfigured}})
		}, false, "this write changes ghost/net1"},
		{"agent of n1 drops every entry with a merge patch", mergePatch(map[string]any{"status": map[string]any{"pods": nil}}),
			false, "this write changes own-1/net1"},
		{"agent of n1 sets the phase", mergePatch(map[string]any{"status": map[string]any{"phase": "Failed"}}),
			false, "observedGeneration, phase, counts and conditions belong to the operator"},
		{"agent token bound to no pod", func() error {
			return nobody.Apply(e.ctx, nsA, "own", []berthv1alpha1.PodAttachmentStatus{agentEntry(byNode["n1"], berthv1alpha1.AttachmentConfigured)})
		}, false, "carries no node"},
		{"agent of n1 reports its own entry Failed (its own: allowed)", func() error {
			en := agentEntry(byNode["n1"], berthv1alpha1.AttachmentFailed)
			en.LastError = "link down (test)"
			return n1.Apply(e.ctx, nsA, "own", []berthv1alpha1.PodAttachmentStatus{en})
		}, true, ""},
	}
	for _, tc := range cases {
		framework.CheckPolicyWrite(t, tc.name, tc.write, tc.allowed, tc.msg)
	}
	// The refused writes changed nothing: each entry is its own agent's last report.
	got := e.waitPC(t, nsA, "own", "two entries", func(pc *berthv1alpha1.PodConfig) bool { return len(pc.Status.Pods) == 2 })
	want := map[string]string{"n1": "own-0 Failed link down (test)", "n2": "own-1 Configured "}
	for _, en := range got.Status.Pods {
		if g := en.Pod + " " + string(en.State) + " " + en.LastError; g != want[en.Node] {
			t.Errorf("entry of node %s after the refused writes: %q, want %q", en.Node, g, want[en.Node])
		}
	}
}
