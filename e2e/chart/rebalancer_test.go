package chart

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/rebalancer"
)

// TestRebalancerChart: the chart's Rebalancer is one the operator accepts (strict decode into the
// API type, then the operator's own validation), the operator gets the flags, and bad thresholds
// are refused at render naming the field.
func TestRebalancerChart(t *testing.T) {
	r := render(t, "rebalancer")
	objs, err := Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var rb *berthv1alpha1.Rebalancer
	var rules []any
	for _, o := range objs {
		switch {
		case o.GetKind() == "Rebalancer":
			b, _ := yaml.Marshal(o.Object)
			rb = &berthv1alpha1.Rebalancer{}
			if err := yaml.UnmarshalStrict(b, rb); err != nil {
				t.Fatalf("the chart's Rebalancer does not decode strictly: %v", err)
			}
		case o.GetKind() == "ClusterRole" && o.GetName() == "rebalancer-rebalancer":
			rules = o.Object["rules"].([]any)
		}
	}
	if rb == nil || rules == nil {
		t.Fatalf("Rebalancer %v, ClusterRole rules %v", rb, rules)
	}
	pol, err := rebalancer.NewPolicy(&rb.Spec, "berth-rebalancer")
	if err != nil {
		t.Fatalf("operator refuses the chart's Rebalancer: %v", err)
	}
	if !pol.DryRun || !pol.SchedulerNames.Has("berth-scheduler-batch") || !pol.ProtectedNS.Has("payments") || rb.Spec.NodeSelector.MatchLabels["berth.dev/pool"] != "general" ||
		rb.Spec.WatcherAddress != "http://rebalancer-loadwatcher.berth-rebalancer.svc:2020" {
		t.Fatalf("spec %+v", rb.Spec)
	}
	// Least privilege: evictions, lists, Events and its own API; no delete, no PDB access.
	b, _ := yaml.Marshal(rules)
	for _, forbidden := range []string{"delete", "poddisruptionbudgets", "'*'"} {
		if strings.Contains(string(b), forbidden) {
			t.Fatalf("rebalancer ClusterRole grants %s:\n%s", forbidden, b)
		}
	}
	if !strings.Contains(r.Manifest, "- --rebalancer\n") || !strings.Contains(r.Manifest, "- --rebalancer-protected-namespaces=berth-rebalancer\n") {
		t.Fatal("the operator does not get --rebalancer and its release namespace")
	}
	if def := render(t, "default"); strings.Contains(def.Manifest, "kind: Rebalancer") || strings.Contains(def.Manifest, "--rebalancer") {
		t.Fatal("the rebalancer is on by default")
	}

	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"low above high", map[string]any{"lowThresholds": map[string]any{"cpu": 90}, "highThresholds": map[string]any{"cpu": 80}}, "rebalancer.lowThresholds.cpu"},
		// null removes a default key, as with helm --set lowThresholds.memory=null.
		{"different resources", map[string]any{"lowThresholds": map[string]any{"memory": nil}}, "rebalancer.lowThresholds.memory"},
		{"above 100", map[string]any{"highThresholds": map[string]any{"cpu": 101}}, "/rebalancer/highThresholds/cpu"},
		{"default scheduler", map[string]any{"schedulerNames": []any{"default-scheduler"}}, "/rebalancer/schedulerNames/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := map[string]any{"enabled": true}
			for k, x := range tc.values {
				v[k] = x
			}
			_, err := Render("bad", "berth-bad", map[string]any{"rebalancer": v})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
