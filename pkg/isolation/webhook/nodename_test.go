package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const berthSA = "system:serviceaccount:berth-system:berth-scheduler"

// testNodes: a pool node by label, one by taint only, one with a mistyped label value and no
// taint (not the pool's), a plain node.
func testNodes() StaticNodes {
	return StaticNodes{
		"pool-1":  {ObjectMeta: metav1.ObjectMeta{Name: "pool-1", Labels: map[string]string{"ipp": "true"}}},
		"tainted": {ObjectMeta: metav1.ObjectMeta{Name: "tainted"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "ipp", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}},
		"near":    {ObjectMeta: metav1.ObjectMeta{Name: "near", Labels: map[string]string{"ipp": "false"}}},
		"plain":   {ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	}
}

func nodeCfg(mode Mode) Config {
	c := cfg(mode)
	c.Nodes = testNodes()
	c.PoolBinders = []string{berthSA}
	return c
}

type failingNodes struct{}

func (failingNodes) Node(context.Context, string) (*corev1.Node, error) {
	return nil, errors.New("cache not synced")
}

func TestMutateNodeName(t *testing.T) {
	onNode := func(n string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
	rule := "; pool nodes belong to instance classes and are reached only through the scheduler of the pod's class, never by naming the node; " +
		"only pods in an exempt namespace (kube-system) may name a pool node"
	for _, tc := range []struct {
		name    string
		nodes   NodeLookup
		pod     *corev1.Pod
		refused string // the whole message ("" admitted), or its start with prefix
		prefix  bool
	}{
		{name: "unclassed pod naming a pool node (label)", pod: pod(nil, onNode("pool-1")),
			refused: "spec.nodeName: names node pool-1, an isolation pool node (label ipp=true)" + rule},
		{name: "unclassed pod naming a pool node (taint only)", pod: pod(map[string]string{"app": "x"}, onNode("tainted")),
			refused: "spec.nodeName: names node tainted, an isolation pool node (taint ipp=true:NoSchedule)" + rule},
		{name: "empty class label counts as no class", pod: pod(map[string]string{"ipp-class": ""}, onNode("pool-1")),
			refused: "spec.nodeName: names node pool-1, an isolation pool node (label ipp=true)" + rule},
		{name: "classed pod naming a pool node keeps the classed refusal", pod: pod(classA, onNode("pool-1")),
			refused: `pod of instance class a sets spec.nodeName "pool-1", which bypasses the scheduler and with it isolation; to pin it, require the node with node affinity on kubernetes.io/hostname instead`},
		{name: "unclassed pod naming a node that does not exist", pod: pod(nil, onNode("ghost")),
			refused: `spec.nodeName "ghost": no such node; a pod may name only an existing node that is not an isolation pool node (one that joined later could be one), or be placed by its scheduler`},
		{name: "no view of the nodes: fail closed", nodes: StaticNodes(nil), pod: pod(nil, onNode("plain")),
			refused: `spec.nodeName "plain": no such node`, prefix: true},
		{name: "cache error: fail closed", nodes: failingNodes{}, pod: pod(nil, onNode("plain")),
			refused: `spec.nodeName "plain": cannot tell whether it is an isolation pool node: cache not synced`},
		{name: "unclassed pod tolerating the pool and naming a pool node: the toleration is named first", pod: pod(nil, func(p *corev1.Pod) {
			p.Spec.NodeName = "pool-1"
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), refused: "spec.tolerations[0]: tolerates the isolation pool taint ipp=true:NoSchedule; only pods of an instance class", prefix: true},
		// Controls.
		{name: "unclassed pod naming a plain node", pod: pod(nil, onNode("plain"))},
		{name: "unclassed pod naming a node labelled ipp=false", pod: pod(nil, onNode("near"))},
		{name: "unclassed pod without nodeName", pod: pod(nil, nil)},
		{name: "exempt namespace may name a pool node", pod: pod(nil, func(p *corev1.Pod) { p.Namespace = "kube-system"; p.Spec.NodeName = "pool-1" })},
		{name: "mirror pod on a pool node", pod: pod(nil, func(p *corev1.Pod) {
			p.Spec.NodeName = "pool-1"
			p.Annotations = map[string]string{MirrorPodAnnotation: "x"}
		})},
	} {
		for _, mode := range []Mode{ModeIPP, ModeBerth, ModeBoth} {
			t.Run(string(mode)+"/"+tc.name, func(t *testing.T) {
				c := nodeCfg(mode)
				if tc.nodes != nil {
					c.Nodes = tc.nodes
				}
				res, err := c.Mutate(tc.pod)
				switch {
				case tc.refused == "" && err != nil:
					t.Fatalf("refused: %v", err)
				case tc.refused == "":
					if len(res.Patch) > 0 {
						t.Fatalf("unclassed pod patched: %v", res.Patch)
					}
				case err == nil:
					t.Fatalf("admitted, want refused: %s", tc.refused)
				case tc.prefix && !strings.HasPrefix(err.Error(), tc.refused):
					t.Fatalf("refusal %q\nwant it to start with %q", err, tc.refused)
				case !tc.prefix && err.Error() != tc.refused:
					t.Fatalf("refusal %q\nwant    %q", err, tc.refused)
				}
			})
		}
	}
}

func TestAdmitBinding(t *testing.T) {
	rule := func(user string) string {
		return "; pool nodes are reached only through the scheduler of the pod's class (" + berthSA + "), not " + user +
			"; only pods in an exempt namespace (kube-system) may be bound there by anyone else"
	}
	for _, tc := range []struct {
		name    string
		b       BindingRequest
		nodes   NodeLookup
		refused string
	}{
		{name: "tenant binds to a pool node", b: BindingRequest{Namespace: "ns", Pod: "p", Node: "pool-1", User: "system:serviceaccount:ns:tenant"},
			refused: "target.name: binding pod ns/p to node pool-1, an isolation pool node (label ipp=true)" + rule("system:serviceaccount:ns:tenant")},
		{name: "the default scheduler binds to a tainted pool node", b: BindingRequest{Namespace: "ns", Pod: "p", Node: "tainted", User: "system:kube-scheduler"},
			refused: "target.name: binding pod ns/p to node tainted, an isolation pool node (taint ipp=true:NoSchedule)" + rule("system:kube-scheduler")},
		{name: "tenant binds to a node that does not exist", b: BindingRequest{Namespace: "ns", Pod: "p", Node: "ghost", User: "alice"},
			refused: `target.name "ghost": no such node`},
		{name: "cache error: fail closed", nodes: failingNodes{}, b: BindingRequest{Namespace: "ns", Pod: "p", Node: "plain", User: "alice"},
			refused: `target.name "plain": cannot tell whether it is an isolation pool node: cache not synced`},
		// Controls.
		{name: "berth-scheduler binds to a pool node", b: BindingRequest{Namespace: "ns", Pod: "p", Node: "pool-1", User: berthSA}},
		{name: "berth-scheduler binds without a node view", nodes: failingNodes{}, b: BindingRequest{Namespace: "ns", Pod: "p", Node: "pool-1", User: berthSA}},
		{name: "tenant binds to a plain node", b: BindingRequest{Namespace: "ns", Pod: "p", Node: "plain", User: "alice"}},
		{name: "anyone binds in an exempt namespace", b: BindingRequest{Namespace: "kube-system", Pod: "p", Node: "pool-1", User: "alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := nodeCfg(ModeBerth)
			if tc.nodes != nil {
				c.Nodes = tc.nodes
			}
			err := c.AdmitBinding(tc.b)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && err == nil:
				t.Fatalf("admitted, want %q", tc.refused)
			case tc.refused != "" && strings.Contains(tc.refused, "; only pods") && err.Error() != tc.refused:
				t.Fatalf("refusal %q\nwant     %q", err, tc.refused)
			case tc.refused != "" && !strings.HasPrefix(err.Error(), tc.refused):
				t.Fatalf("refusal %q\nwant it to start with %q", err, tc.refused)
			}
		})
	}
}

// TestHandlerBindings: both ways to create a Binding reach AdmitBinding through the handler,
// refused with 403 and the rule, never patched; a pod CREATE on the same handler is still a pod.
func TestHandlerBindings(t *testing.T) {
	h := &Handler{Config: nodeCfg(ModeBerth)}
	bind := func(resource, sub, user, node string) *admissionv1.AdmissionRequest {
		raw, _ := json.Marshal(corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Target: corev1.ObjectReference{Kind: "Node", Name: node}})
		return &admissionv1.AdmissionRequest{UID: "u", Name: "p", Namespace: "ns", Operation: admissionv1.Create,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: resource}, SubResource: sub,
			UserInfo: authenticationv1.UserInfo{Username: user}, Object: runtime.RawExtension{Raw: raw}}
	}
	for _, tc := range []struct {
		name    string
		req     *admissionv1.AdmissionRequest
		allowed bool
	}{
		{"pods/binding by a tenant to a pool node", bind("pods", "binding", "alice", "pool-1"), false},
		{"legacy bindings by a tenant to a pool node", bind("bindings", "", "alice", "pool-1"), false},
		{"pods/binding by berth-scheduler to a pool node", bind("pods", "binding", berthSA, "pool-1"), true},
		{"legacy bindings by a tenant to a plain node", bind("bindings", "", "alice", "plain"), true},
		{"an UPDATE of a binding is not judged", func() *admissionv1.AdmissionRequest {
			r := bind("pods", "binding", "alice", "pool-1")
			r.Operation = admissionv1.Update
			return r
		}(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.Admit(tc.req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v (%v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if resp.Patch != nil {
				t.Fatalf("a binding was patched")
			}
			if !tc.allowed && (resp.Result.Code != http.StatusForbidden || resp.Result.Reason != metav1.StatusReasonForbidden ||
				!strings.HasPrefix(resp.Result.Message, "instance isolation: target.name: binding pod ns/p to node pool-1")) {
				t.Fatalf("refusal %+v", resp.Result)
			}
		})
	}
}

func TestValidatePoolBinders(t *testing.T) {
	for _, tc := range []struct {
		binders []string
		want    string
	}{
		{[]string{berthSA, "system:kube-scheduler"}, ""},
		{[]string{berthSA, berthSA}, `poolBinders[1]: Duplicate value: "` + berthSA + `"`},
		{[]string{" system:kube-scheduler"}, `poolBinders[0]: Invalid value: " system:kube-scheduler": must be a username`},
		{[]string{""}, `poolBinders[0]: Invalid value: ""`},
	} {
		c := cfg(ModeBerth)
		c.PoolBinders = tc.binders
		got := c.Validate().ToAggregate()
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%v: %v", tc.binders, got)
		case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
			t.Errorf("%v: %v, want %q", tc.binders, got, tc.want)
		}
	}
}
