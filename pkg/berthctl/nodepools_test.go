package berthctl

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

// The defaults isolationPoolFromArgs assumes for a flag the chart left out are the operator's.
func TestIsolationPoolDefaultsAreTheOperators(t *testing.T) {
	d := webhook.Defaults()
	p, _, err := isolationPoolFromArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := isolationPool{labelKey: d.PoolLabel, labelValue: d.PoolValue, taintKey: d.TaintKey, taintValue: d.TaintValue,
		taintEffect: string(d.TaintEffect), marker: d.AutoscalerMarker}
	if p != want {
		t.Errorf("defaults %+v, the operator's %+v", p, want)
	}
}

func TestIsolationPoolFromArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    isolationPool
		on      bool
		wantErr string
	}{
		{name: "webhook off", args: []string{"--leader-elect"}, want: isolationPool{"ipp", "true", "ipp", "true", "NoSchedule", true}},
		{name: "chart's args", args: []string{"--isolation-webhook", "--isolation-mode=berth", "--isolation-pool-label=pool=iso",
			"--isolation-pool-taint=dedicated=iso:NoExecute", "--isolation-autoscaler-marker=false"},
			want: isolationPool{"pool", "iso", "dedicated", "iso", "NoExecute", false}, on: true},
		{name: "separate values", args: []string{"--isolation-webhook=true", "--isolation-pool-label", "a=b", "--isolation-pool-taint", "c=:NoSchedule"},
			want: isolationPool{"a", "b", "c", "", "NoSchedule", true}, on: true},
		{name: "webhook=false", args: []string{"--isolation-webhook=false", "--isolation-pool-label=a=b"},
			want: isolationPool{"a", "b", "ipp", "true", "NoSchedule", true}},
		{name: "bad label", args: []string{"--isolation-webhook", "--isolation-pool-label=nolabel"}, wantErr: `--isolation-pool-label="nolabel": want key=value`},
		{name: "bad taint", args: []string{"--isolation-webhook", "--isolation-pool-taint=k=v"}, wantErr: `--isolation-pool-taint="k=v": want key=value:Effect`},
		{name: "bad marker", args: []string{"--isolation-autoscaler-marker=maybe"}, wantErr: `--isolation-autoscaler-marker="maybe" is not a boolean`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, on, err := isolationPoolFromArgs(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tc.want || on != tc.on {
				t.Errorf("got %+v on=%v, want %+v on=%v", p, on, tc.want, tc.on)
			}
		})
	}
}

func nodePool(name string, labels map[string]any, taints []any, reqs ...any) *unstructured.Unstructured {
	spec := map[string]any{"requirements": append([]any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}}}, reqs...)}
	if taints != nil {
		spec["taints"] = taints
	}
	tmpl := map[string]any{"spec": spec}
	if labels != nil {
		tmpl["metadata"] = map[string]any{"labels": labels}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"template": tmpl},
	}}
}

var (
	poolTaint   = []any{map[string]any{"key": "ipp", "value": "true", "effect": "NoSchedule"}}
	markerReq   = map[string]any{"key": classmarker.Key, "operator": "Exists"}
	poolLabelIn = map[string]any{"key": "ipp", "operator": "In", "values": []any{"true"}}
)

func TestNodePoolChecks(t *testing.T) {
	chartArgs := []string{"--isolation-webhook", "--isolation-pool-label=ipp=true", "--isolation-pool-taint=ipp=true:NoSchedule", "--isolation-autoscaler-marker=true"}
	for _, tc := range []struct {
		name      string
		args      []string
		noCRD     bool
		pools     []*unstructured.Unstructured
		want      []string // "name state detail-substring", in order
		wantFixes map[string]string
	}{
		{name: "no karpenter", args: chartArgs, noCRD: true, pools: nil, want: nil},
		{name: "isolation off", args: []string{"--leader-elect"}, pools: []*unstructured.Unstructured{nodePool("a", nil, nil)}, want: nil},
		{name: "a right pool and a plain one", args: chartArgs, pools: []*unstructured.Unstructured{
			nodePool("iso", map[string]any{"ipp": "true"}, poolTaint, markerReq),
			nodePool("plain", map[string]any{"berth.dev/autoscaled-pool": "true"}, nil),
		}, want: []string{
			"iso ok makes isolation pool nodes",
			"plain ok not for the isolation pool: lacks the label ipp=true, the taint ipp=true:NoSchedule, the requirement " + classmarker.Key + " Exists",
		}},
		{name: "label as a requirement counts", args: chartArgs, pools: []*unstructured.Unstructured{
			nodePool("iso", nil, poolTaint, poolLabelIn, markerReq),
		}, want: []string{"iso ok makes isolation pool nodes"}},
		{name: "each part missing", args: chartArgs, pools: []*unstructured.Unstructured{
			nodePool("no-marker", map[string]any{"ipp": "true"}, poolTaint),
			nodePool("no-taint", map[string]any{"ipp": "true"}, nil, markerReq),
			nodePool("wrong-label", map[string]any{"ipp": "false"}, poolTaint, markerReq),
			nodePool("wrong-effect", map[string]any{"ipp": "true"}, []any{map[string]any{"key": "ipp", "value": "true", "effect": "NoExecute"}}, markerReq),
			nodePool("marker-in", map[string]any{"ipp": "true"}, poolTaint, map[string]any{"key": classmarker.Key, "operator": "In", "values": []any{"x"}}),
		}, want: []string{
			"marker-in fail its template lacks the requirement " + classmarker.Key + " Exists",
			"no-marker fail its template lacks the requirement " + classmarker.Key + " Exists",
			"no-taint fail its template lacks the taint ipp=true:NoSchedule",
			"wrong-effect fail its template lacks the taint ipp=true:NoSchedule",
			"wrong-label fail its template lacks the label ipp=true",
			"- warn no NodePool makes nodes for the isolation pool",
		}, wantFixes: map[string]string{"no-taint": "kubectl edit nodepool no-taint", "-": classmarker.Key + " Exists"}},
		{name: "marker off: label and taint suffice", args: []string{"--isolation-webhook", "--isolation-autoscaler-marker=false"}, pools: []*unstructured.Unstructured{
			nodePool("iso", map[string]any{"ipp": "true"}, poolTaint),
		}, want: []string{"iso ok makes isolation pool nodes (label ipp=true, taint ipp=true:NoSchedule)"}},
		{name: "no nodepool at all", args: chartArgs, want: []string{"- warn no NodePool makes nodes for the isolation pool"}},
		{name: "unreadable args", args: []string{"--isolation-webhook", "--isolation-pool-taint=broken"}, want: []string{`- warn the operator's --isolation-pool-taint="broken"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
				crdResource: "CustomResourceDefinitionList", NodePoolResource: "NodePoolList",
			})
			// Another CRD is always there: only Karpenter's own says Karpenter is installed.
			if err := dyn.Tracker().Create(crdResource, crd("secondaryschedulers.berth.dev", true), ""); err != nil {
				t.Fatal(err)
			}
			if !tc.noCRD {
				if err := dyn.Tracker().Create(crdResource, crd(nodePoolCRD, true), ""); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range tc.pools {
				if err := dyn.Tracker().Create(NodePoolResource, p, ""); err != nil {
					t.Fatal(err)
				}
			}
			op := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "berth-system", Name: "berth-operator"},
				Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Args: tc.args}}}}}}
			checks, err := nodePoolChecks(context.Background(), StatusInput{Client: fake.NewClientset(), Dynamic: dyn, BerthNamespace: "berth-system"}, op)
			if err != nil {
				t.Fatal(err)
			}
			if len(checks) != len(tc.want) {
				t.Fatalf("got %d checks %+v, want %d %v", len(checks), checks, len(tc.want), tc.want)
			}
			for i, c := range checks {
				got := c.Name + " " + c.State + " " + c.Detail
				if !strings.HasPrefix(got, strings.SplitN(tc.want[i], " ", 3)[0]+" "+strings.SplitN(tc.want[i], " ", 3)[1]+" ") || !strings.Contains(got, strings.SplitN(tc.want[i], " ", 3)[2]) {
					t.Errorf("check %d: %q, want %q", i, got, tc.want[i])
				}
				if c.State != OK && c.Fix == "" {
					t.Errorf("check %d (%s) is %s without a fix", i, c.Name, c.State)
				}
				if want, ok := tc.wantFixes[c.Name]; ok && !strings.Contains(c.Fix, want) {
					t.Errorf("check %s: fix %q, want it to contain %q", c.Name, c.Fix, want)
				}
			}
		})
	}
	// Without an operator Deployment (no chart), nothing is checked.
	if checks, err := nodePoolChecks(context.Background(), StatusInput{}, nil); err != nil || checks != nil {
		t.Errorf("no operator: %v %v", checks, err)
	}
}
