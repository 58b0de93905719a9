package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

// isoNodes: two pool nodes (the chart's default pool label) and a plain one. The policies see
// the pool's nodes as params (their binding's paramRef.selector), the webhook through its
// Node cache.
func isoNodes() webhook.StaticNodes {
	return webhook.StaticNodes{
		"pool-1": {ObjectMeta: metav1.ObjectMeta{Name: "pool-1", Labels: map[string]string{"ipp": "true"}}},
		"pool-2": {ObjectMeta: metav1.ObjectMeta{Name: "pool-2", Labels: map[string]string{"ipp": "true", "zone": "z1"}}},
		"plain":  {ObjectMeta: metav1.ObjectMeta{Name: "plain", Labels: map[string]string{"ipp": "false"}}},
	}
}

// nodeNameCases: issue 35's nodeName door, refused on a pool node, open elsewhere.
func nodeNameCases() []isoCase {
	on := func(node string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
	return []isoCase{
		{name: "unclassed pod naming a pool node", ns: "tenant", pod: isoPod(map[string]string{"app": "web"}, on("pool-2")),
			refused: "spec.nodeName: names node pool-2, an isolation pool node (label ipp=true); pool nodes belong to instance classes and are reached only through the scheduler of the pod's class"},
		{name: "unclassed pod naming a pool node and tolerating the pool", ns: "tenant", pod: isoPod(nil, func(p *corev1.Pod) {
			p.Spec.NodeName = "pool-1"
			p.Spec.Tolerations = []corev1.Toleration{isoPoolTol}
		}), refused: "spec.tolerations[0]: tolerates the isolation pool taint ipp=true:NoSchedule; only pods of an instance class"},
		{name: "unclassed pod naming a plain node", ns: "tenant", pod: isoPod(nil, on("plain"))},
		{name: "exempt namespace: unclassed pod naming a pool node", ns: "exempt", pod: isoPod(nil, on("pool-1"))},
	}
}

// addNodeParams records, for a policy binding with a paramRef selector, the isoNodes it
// selects, and the binding webhook's matchCondition.
func (pe *policyEval) addNodeParams(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	switch o.GetKind() {
	case "ValidatingAdmissionPolicyBinding":
		var b admissionv1.ValidatingAdmissionPolicyBinding
		toTypedOrFail(t, o, &b)
		if b.Spec.ParamRef == nil {
			return
		}
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.ParamRef.Selector)
		if err != nil {
			t.Fatal(err)
		}
		pe.params[b.Spec.PolicyName] = []map[string]any{}
		for _, n := range isoNodes() {
			if sel.Matches(labels.Set(n.Labels)) {
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n)
				if err != nil {
					t.Fatal(err)
				}
				pe.params[b.Spec.PolicyName] = append(pe.params[b.Spec.PolicyName], obj)
			}
		}
	case "MutatingWebhookConfiguration":
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			if h.(map[string]any)["name"] == "instance-isolation-binding.berth.dev" {
				mc := h.(map[string]any)["matchConditions"].([]any)
				pe.bindingCond = mc[0].(map[string]any)["expression"].(string)
			}
		}
	}
}

// validate runs p's variables and validations on act as the API server does, once per param
// for a policy with paramKind (none selected: parameterNotFoundAction Allow), and returns the
// first failed validation's message ("" admitted).
func (pe *policyEval) validate(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy, act map[string]any, maxCost *uint64) string {
	t.Helper()
	params := []map[string]any{nil}
	if p.Spec.ParamKind != nil {
		ps, ok := pe.params[p.Name]
		if !ok {
			t.Fatalf("policy %s has paramKind %v but no binding with a paramRef selector", p.Name, p.Spec.ParamKind)
		}
		params = ps
	}
	vars := act["variables"].(map[string]any)
	for _, param := range params {
		act["params"] = param
		clear(vars)
		for _, v := range p.Spec.Variables {
			vars[v.Name] = pe.eval(t, v.Expression, act, maxCost)
		}
		for _, v := range p.Spec.Validations {
			if !pe.eval(t, v.Expression, act, maxCost).(bool) {
				return pe.eval(t, v.MessageExpression, act, maxCost).(string)
			}
		}
	}
	return ""
}

// bindingVerdict decides a Binding of pod ns/pod to node by user with the chart's policies,
// and whether the binding webhook's matchCondition sends it.
func (pe *policyEval) bindingVerdict(t *testing.T, ns, pod, node, user string) (msg string, sent bool) {
	t.Helper()
	obj := map[string]any{"metadata": map[string]any{"name": pod, "namespace": ns}, "target": map[string]any{"kind": "Node", "name": node}}
	act := map[string]any{"object": obj, "oldObject": nil, "variables": map[string]any{},
		"request": map[string]any{"operation": "CREATE", "namespace": ns, "userInfo": map[string]any{"username": user}}}
	var cost uint64
	sent = pe.eval(t, pe.bindingCond, act, &cost).(bool)
	nsLabels := labels.Set{"kubernetes.io/metadata.name": ns}
	for _, p := range pe.policies {
		if r := p.Spec.MatchConstraints.ResourceRules[0]; !contains(r.Resources, "pods/binding") || !contains(r.Resources, "bindings") {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.MatchConstraints.NamespaceSelector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(nsLabels) {
			continue
		}
		matched := true
		for _, c := range p.Spec.MatchConditions {
			matched = matched && pe.eval(t, c.Expression, act, &cost).(bool)
		}
		if matched {
			if msg := pe.validate(t, p, act, &cost); msg != "" {
				return msg, sent
			}
		}
	}
	if cost >= celconfig.PerCallLimit {
		t.Errorf("dearest expression costs %d, over the API server's per-call limit", cost)
	}
	return "", sent
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

type bindingCase struct {
	name, ns, node, user string
	refused              bool
}

// bindingCases for release rel in mode: a tenant, the default scheduler and berth-scheduler's
// ServiceAccount binding to a pool node and a plain one.
func bindingCases(rel, mode string) []bindingCase {
	berth := "system:serviceaccount:" + rel + "-system:" + rel + "-scheduler"
	tenant := "system:serviceaccount:" + rel + "-tenant:attacker"
	return []bindingCase{
		{name: "tenant binds to a pool node", ns: "tenant", node: "pool-1", user: tenant, refused: true},
		{name: "default scheduler binds to a pool node", ns: "tenant", node: "pool-2", user: "system:kube-scheduler", refused: mode != "ipp"},
		{name: "berth-scheduler binds to a pool node", ns: "tenant", node: "pool-1", user: berth},
		{name: "tenant binds to a plain node", ns: "tenant", node: "plain", user: tenant},
		{name: "exempt namespace: tenant binds to a pool node", ns: "exempt", node: "pool-1", user: tenant},
	}
}

// TestIsolationBindingPolicyAgreesWithWebhook: the binding policy and the webhook's
// AdmitBinding (configured by the chart's operator arguments) refuse the same bindings with the
// same words; the webhook's matchCondition sends every binding it would refuse except the
// default scheduler's (judged by the policy alone, so that an unavailable webhook never stops
// the default scheduler).
func TestIsolationBindingPolicyAgreesWithWebhook(t *testing.T) {
	for _, mode := range []string{"ipp", "berth", "both"} {
		rel := "iso-" + mode
		objs, nsOf := isoRelease(t, mode, rel)
		hook := webhookConfigOf(t, objs, rel)
		hook.Nodes = isoNodes()
		pe := newPolicyEval(t, objs)
		if pe.bindingCond == "" {
			t.Fatalf("%s: no binding webhook", mode)
		}
		for _, tc := range bindingCases(rel, mode) {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				ns := nsOf[tc.ns]
				herr := hook.AdmitBinding(webhook.BindingRequest{Namespace: ns, Pod: "p", Node: tc.node, User: tc.user})
				msg, sent := pe.bindingVerdict(t, ns, "p", tc.node, tc.user)
				if (herr != nil) != tc.refused || (msg != "") != tc.refused {
					t.Fatalf("webhook %v, policy %q: want refused %v", herr, msg, tc.refused)
				}
				if tc.refused && msg != "instance isolation: "+herr.Error() {
					t.Fatalf("the policy and the webhook word the refusal differently:\npolicy  %q\nwebhook %q", msg, "instance isolation: "+herr.Error())
				}
				if want := tc.refused && tc.user != "system:kube-scheduler"; sent != want && tc.refused {
					t.Fatalf("binding webhook's matchCondition sends it: %v, want %v", sent, want)
				}
			})
		}
	}
}

// createIsoNodes creates isoNodes on the API server (objects only: no kubelet behind them).
func createIsoNodes(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	for _, n := range isoNodes() {
		n := n.DeepCopy()
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	}
}

// apiServerBindings runs bindingCases on the API server as the test's admin (a requester that
// is no class's scheduler, like the tenant): a real unscheduled pod per case, bound directly.
// The policy alone judges here (no webhook); the words must be the webhook's.
func apiServerBindings(ctx context.Context, t *testing.T, cs kubernetes.Interface, hook webhook.Config, nsOf map[string]string, admin string) {
	t.Helper()
	for i, tc := range []bindingCase{
		{name: "admin binds to a pool node", ns: "tenant", node: "pool-1", user: admin, refused: true},
		{name: "admin binds to a plain node", ns: "tenant", node: "plain", user: admin},
		{name: "exempt namespace: admin binds to a pool node", ns: "exempt", node: "pool-2", user: admin},
	} {
		t.Run("binding/"+tc.name, func(t *testing.T) {
			ns := nsOf[tc.ns]
			p := isoPod(nil, nil)
			p.Namespace, p.Name = ns, fmt.Sprintf("bind-%d", i)
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cs.CoreV1().Pods(ns).Delete(context.Background(), p.Name, *metav1.NewDeleteOptions(0))
			})
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: tc.node}}
			// why: a new binding of a policy takes effect a moment after it is created. The wait
			// binds in dry-run: a real binding made before the policy took effect would leave
			// the pod assigned, and every later try would fail as a conflict, not the refusal.
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
				err := cs.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return (err != nil) == tc.refused, nil
			})
			err := cs.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{})
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			want := "instance isolation: " + hook.AdmitBinding(webhook.BindingRequest{Namespace: ns, Pod: p.Name, Node: tc.node, User: admin}).Error()
			if err == nil || !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), want) {
				t.Fatalf("bind: %v\nwant the policy's refusal ending with %q", err, want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// whoAmI is the username the API server gives cs's credentials.
func whoAmI(ctx context.Context, t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.UserInfo.Username
}
