package chart

import (
	"strings"
	"testing"

	schedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

// TestInstanceIsolationValues: scheduler.plugins.instanceIsolation renders into the
// SecondaryScheduler, the operator's render path accepts it and yields the isolated profile,
// and the schema refuses bad keys, namespaces and profile names.
func TestInstanceIsolationValues(t *testing.T) {
	var v map[string]any
	if err := yaml.Unmarshal([]byte(`scheduler: {plugins: {instanceIsolation: {enabled: true, weight: 7, isolatedProfileName: berth-scheduler-isolated,
  args: {strict: true, spreadReplicas: true, classLabels: [ipp-class], exemptNamespaces: [kube-system]}}}}`), &v); err != nil {
		t.Fatal(err)
	}
	r, err := Render("berth", "berth-system", v)
	if err != nil {
		t.Fatal(err)
	}
	ss := secondaryScheduler(t, r)
	ii := ss.Spec.Plugins.InstanceIsolation
	if ii == nil || *ii.Weight.Weight != 7 || ii.IsolatedProfileName != "berth-scheduler-isolated" || !*ii.Args.Strict || !*ii.Args.SpreadReplicas ||
		len(ii.Args.ClassLabels) != 1 || len(ii.Args.ExemptNamespaces) != 1 {
		t.Fatalf("instanceIsolation rendered as %+v", ii)
	}
	cfg, _ := operatorConfig(t, ss)
	if len(cfg.Profiles) != 2 || cfg.Profiles[1].SchedulerName != "berth-scheduler-isolated" {
		t.Fatalf("profiles: %d", len(cfg.Profiles))
	}

	// Disabled by default: nothing rendered.
	if ss := secondaryScheduler(t, render(t, "default")); ss.Spec.Plugins.InstanceIsolation != nil {
		t.Fatalf("instanceIsolation rendered while disabled")
	}

	for _, bad := range []struct{ values, field string }{
		{`scheduler: {plugins: {instanceIsolation: {enabled: true, weight: 1, args: {classLabels: ["not a key"]}}}}`, "/scheduler/plugins/instanceIsolation/args/classLabels/0"},
		{`scheduler: {plugins: {instanceIsolation: {enabled: true, weight: 1, args: {exemptNamespaces: [Kube_System]}}}}`, "/scheduler/plugins/instanceIsolation/args/exemptNamespaces/0"},
		{`scheduler: {plugins: {instanceIsolation: {enabled: true, weight: 1, args: {stict: true}}}}`, "/scheduler/plugins/instanceIsolation/args"},
		{`scheduler: {plugins: {instanceIsolation: {enabled: true, weight: 1, isolatedProfileName: default-scheduler}}}`, "/scheduler/plugins/instanceIsolation/isolatedProfileName"},
		{`scheduler: {plugins: {instanceIsolation: {enabled: true, weight: 0}}}`, "/scheduler/plugins/instanceIsolation/weight"},
		{`scheduler: {plugins: {instanceIsolation: {enabled: true, weight: 1, stict: true}}}`, "/scheduler/plugins/instanceIsolation"},
	} {
		var bv map[string]any
		if err := yaml.Unmarshal([]byte(bad.values), &bv); err != nil {
			t.Fatal(err)
		}
		_, err := Render("berth", "berth-system", bv)
		if err == nil || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("%s: err = %v, want one naming %s", bad.values, err, bad.field)
		}
	}
}

// operatorConfig is the scheduler configuration the operator renders from ss, as the
// scheduler loads it, and its YAML; a SecondaryScheduler the operator would refuse fails the
// test.
func operatorConfig(t *testing.T, ss *berthv1alpha1.SecondaryScheduler) (*schedulerconfig.KubeSchedulerConfiguration, []byte) {
	t.Helper()
	rendered, err := schedconfig.Render(ss, nil)
	if err != nil {
		t.Fatalf("operator would refuse it: %s", schedconfig.ErrorMessage(err))
	}
	cfg, err := schedconfig.Validate(rendered.YAML)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, rendered.YAML
}
