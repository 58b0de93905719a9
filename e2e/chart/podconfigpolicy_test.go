package chart

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/runtime"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// agentPodConfigPolicy renders the chart with podConfig enabled and returns the agent's
// PodConfig status policy.
func agentPodConfigPolicy(t *testing.T) *admissionv1.ValidatingAdmissionPolicy {
	t.Helper()
	r, err := Render("berth", "berth-system", map[string]any{
		"podConfig": map[string]any{"enabled": true},
		"agent":     map[string]any{"criSocket": "/run/containerd/containerd.sock"}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ValidatingAdmissionPolicy" && o.GetName() == "berth-agent-own-podconfig-entries" {
			var p admissionv1.ValidatingAdmissionPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &p); err != nil {
				t.Fatal(err)
			}
			return &p
		}
	}
	t.Fatal("the chart renders no berth-agent-own-podconfig-entries policy with podConfig enabled")
	return nil
}

// podConfigWithEntries is a PodConfig object (as the API server hands it to admission) with n
// entries spread over nodes n0..n9, each on PodNetwork blue as the operator writes them, and
// the operator's fields.
func podConfigWithEntries(n int, state func(i int) string) map[string]any {
	pods := make([]any, 0, n)
	for i := 0; i < n; i++ {
		pods = append(pods, map[string]any{"pod": fmt.Sprintf("pod-%05d", i), "attachment": "net1", "podUID": fmt.Sprintf("uid-%05d", i),
			"node": fmt.Sprintf("n%d", i%10), "address": fmt.Sprintf("10.%d.%d.%d/8", i/65536, i/256%256, i%256), "network": "blue", "bridge": "berth-blue",
			"interface": "net1", "hostPeer": "bp0123456789abc", "state": state(i), "lastTransitionTime": "2026-11-23T05:00:00Z"})
	}
	return map[string]any{"apiVersion": "berth.dev/v1alpha1", "kind": "PodConfig",
		"metadata": map[string]any{"name": "big", "namespace": "ns"},
		"status": map[string]any{"observedGeneration": int64(1), "phase": "Configuring", "podCount": int64(n), "configuredCount": int64(0),
			"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Configuring", "message": "x", "lastTransitionTime": "2026-11-23T05:00:00Z"}},
			"pods":       pods},
		"spec": map[string]any{"networkAttachments": []any{map[string]any{"name": "net1", "network": "blue"}}}}
}

// evalPolicy evaluates the policy's variables (in order, as admission does) and validations
// for a request by the agent of node n0 with the API server's CEL environment and cost
// tracking. It returns each validation's result and message, the cost of the dearest single
// expression and the summed cost of every expression evaluated.
func evalPolicy(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy, oldObj, obj map[string]any) (results []bool, messages []string, maxCost, cost uint64) {
	t.Helper()
	envSet, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: environment.DefaultCompatibilityVersion(),
		EnvOptions: []cel.EnvOption{cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType),
			cel.Variable("request", cel.DynType), cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType))},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := envSet.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{}
	act := map[string]any{"object": obj, "oldObject": oldObj, "variables": vars,
		"request": map[string]any{"userInfo": map[string]any{"username": "system:serviceaccount:berth-system:berth-agent",
			"extra": map[string]any{"authentication.kubernetes.io/node-name": []any{"n0"}}}}}
	eval := func(expr string) any {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("compiling %q: %v", expr, iss.Err())
		}
		// why: the API server's per-expression limit; exceeding it fails the request.
		prg, err := env.Program(ast, cel.CostLimit(celconfig.PerCallLimit), cel.EvalOptions(cel.OptTrackCost))
		if err != nil {
			t.Fatal(err)
		}
		out, det, err := prg.Eval(act)
		if err != nil {
			t.Fatalf("evaluating %q: %v", expr, err)
		}
		cost += *det.ActualCost()
		maxCost = max(maxCost, *det.ActualCost())
		return out.Value()
	}
	for _, v := range p.Spec.Variables {
		vars[v.Name] = eval(v.Expression)
	}
	for _, v := range p.Spec.Validations {
		ok := eval(v.Expression).(bool)
		results = append(results, ok)
		msg := v.Message
		if !ok && v.MessageExpression != "" {
			msg = eval(v.MessageExpression).(string)
		}
		messages = append(messages, msg)
	}
	return results, messages, maxCost, cost
}

// TestAgentPodConfigPolicyCost: the policy's expressions stay within the API server's CEL cost
// limits (each expression under the per-call limit, all of them under the per-request budget)
// on PodConfigs as large as etcd stores (its 1.5 MiB object limit holds about 6000 entries),
// because they are linear in the entries (no pairwise comparison), and still decide correctly
// there. The real API server's behaviour is proved in e2e/suites/podconfig-api.
func TestAgentPodConfigPolicyCost(t *testing.T) {
	p := agentPodConfigPolicy(t)
	configured := func(i int) string { return "Configured" }
	allocated := func(i int) string { return "Allocated" }
	for _, tc := range []struct {
		name    string
		n       int
		mutate  func(obj map[string]any)
		wantOK  bool
		wantMsg string
	}{
		{name: "n0 reports its own 100 of 1000", n: 1000, wantOK: true},
		{name: "n0 reports its own 600 of 6000", n: 6000, wantOK: true},
		{name: "n0 changes one entry of n7 among 6000", n: 6000, mutate: func(obj map[string]any) {
			obj["status"].(map[string]any)["pods"].([]any)[5997].(map[string]any)["state"] = "Removed"
		}, wantMsg: "this write changes pod-05997/net1"},
		{name: "n0 sets the phase among 6000", n: 6000, mutate: func(obj map[string]any) {
			obj["status"].(map[string]any)["phase"] = "Failed"
		}, wantMsg: "belong to the operator"},
		// why: the entry's network is the operator's binding; an agent moving n7's entry to
		// another network is changing another node's entry like any other field.
		{name: "n0 changes the network of an entry of n7 among 6000", n: 6000, mutate: func(obj map[string]any) {
			obj["status"].(map[string]any)["pods"].([]any)[5997].(map[string]any)["network"] = "red"
		}, wantMsg: "this write changes pod-05997/net1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldObj := podConfigWithEntries(tc.n, allocated)
			// The agent of n0 reports its entries Configured; everything else as it was.
			obj := podConfigWithEntries(tc.n, func(i int) string {
				if i%10 == 0 {
					return configured(i)
				}
				return allocated(i)
			})
			if tc.mutate != nil {
				tc.mutate(obj)
			}
			results, msgs, maxCost, cost := evalPolicy(t, p, oldObj, obj)
			ok := true
			var denied []string
			for i, r := range results {
				if !r {
					ok = false
					denied = append(denied, msgs[i])
				}
			}
			if ok != tc.wantOK || (!ok && !strings.Contains(strings.Join(denied, "; "), tc.wantMsg)) {
				t.Errorf("allowed %v (denials %q), want allowed %v saying %q", ok, denied, tc.wantOK, tc.wantMsg)
			}
			if maxCost >= celconfig.PerCallLimit || cost >= celconfig.RuntimeCELCostBudget {
				t.Errorf("%d entries: dearest expression %d (limit %d), all %d (budget %d)", tc.n, maxCost, celconfig.PerCallLimit, cost, celconfig.RuntimeCELCostBudget)
			}
			t.Logf("%d entries: dearest expression %d of %d, all expressions %d of %d", tc.n, maxCost, celconfig.PerCallLimit, cost, celconfig.RuntimeCELCostBudget)
		})
	}
}
