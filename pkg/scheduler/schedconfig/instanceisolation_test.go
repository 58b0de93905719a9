package schedconfig

import (
	"strings"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

func multiPointHas(ps config.PluginSet, name string) (enabled, disabled bool) {
	for _, e := range ps.Enabled {
		enabled = enabled || e.Name == name
	}
	for _, d := range ps.Disabled {
		disabled = disabled || d.Name == name
	}
	return enabled, disabled
}

// TestRenderInstanceIsolation: the plugin renders with its weight and args; an isolated
// profile name adds a second profile with the same plugins and InterPodAffinity disabled
// (the main profile keeps it); bad args name the CR field once, not once per profile.
func TestRenderInstanceIsolation(t *testing.T) {
	cases := []struct {
		name     string
		ps       *berthv1alpha1.PluginSet
		err      string
		profiles int
	}{
		{name: "plugin only", profiles: 1, ps: &berthv1alpha1.PluginSet{InstanceIsolation: &berthv1alpha1.InstanceIsolationPlugin{
			Weight: berthv1alpha1.Weight{Weight: ptr.To[int32](10)},
			Args:   configv1.InstanceIsolationArgs{Strict: ptr.To(true), ExemptNamespaces: []string{"kube-system"}}}}},
		{name: "isolated profile", profiles: 2, ps: &berthv1alpha1.PluginSet{InstanceIsolation: &berthv1alpha1.InstanceIsolationPlugin{
			IsolatedProfileName: "berth-scheduler-isolated",
			Args:                configv1.InstanceIsolationArgs{ClassLabels: []string{"ipp-class"}, SpreadReplicas: ptr.To(true)}}}},
		{name: "isolated profile with NodeImageLocality", profiles: 2, ps: &berthv1alpha1.PluginSet{
			NodeImageLocality: &berthv1alpha1.NodeImageLocalityPlugin{},
			InstanceIsolation: &berthv1alpha1.InstanceIsolationPlugin{IsolatedProfileName: "iso"}}},
		{name: "bad class label", ps: &berthv1alpha1.PluginSet{InstanceIsolation: &berthv1alpha1.InstanceIsolationPlugin{
			IsolatedProfileName: "iso", Args: configv1.InstanceIsolationArgs{ClassLabels: []string{"not a key"}}}},
			err: `spec.plugins.instanceIsolation.args.classLabels[0]: Invalid value: "not a key"`},
		{name: "isolated name equals the main one", ps: &berthv1alpha1.PluginSet{InstanceIsolation: &berthv1alpha1.InstanceIsolationPlugin{
			IsolatedProfileName: DefaultSchedulerName}}, err: "spec.plugins.instanceIsolation.isolatedProfileName: Invalid value: \"berth-scheduler\": must differ from spec.schedulerName"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Render(cr(tc.ps, nil), nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want containing %q", err, tc.err)
				}
				if n := strings.Count(err.Error(), "classLabels[0]"); n > 1 {
					t.Fatalf("the same args error is reported %d times: %v", n, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Validate(r.YAML)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Profiles) != tc.profiles {
				t.Fatalf("%d profiles, want %d:\n%s", len(cfg.Profiles), tc.profiles, r.YAML)
			}
			main := cfg.Profiles[0]
			if en, dis := multiPointHas(main.Plugins.MultiPoint, "InstanceIsolation"); !en || dis {
				t.Errorf("main profile: InstanceIsolation enabled %v disabled %v", en, dis)
			}
			if _, dis := multiPointHas(main.Plugins.MultiPoint, "InterPodAffinity"); dis {
				t.Errorf("main profile must keep InterPodAffinity")
			}
			// Its Filter runs right after the node-level filters (a cheap refusal before
			// resource fit, ports, volumes and inter-pod affinity).
			for _, prof := range cfg.Profiles {
				var names []string
				for _, f := range prof.Plugins.Filter.Enabled {
					names = append(names, f.Name)
				}
				if got := strings.Join(names, ","); !strings.HasPrefix(got, "NodeUnschedulable,NodeName,TaintToleration,NodeAffinity,InstanceIsolation") {
					t.Errorf("profile %s: filter.enabled %s, want InstanceIsolation after the node-level filters", prof.SchedulerName, got)
				}
			}
			if tc.profiles == 2 {
				iso := cfg.Profiles[1]
				if iso.SchedulerName != tc.ps.InstanceIsolation.IsolatedProfileName {
					t.Errorf("isolated profile named %q", iso.SchedulerName)
				}
				if en, dis := multiPointHas(iso.Plugins.MultiPoint, "InstanceIsolation"); !en || dis {
					t.Errorf("isolated profile: InstanceIsolation enabled %v disabled %v", en, dis)
				}
				if _, dis := multiPointHas(iso.Plugins.MultiPoint, "InterPodAffinity"); !dis {
					t.Errorf("isolated profile must disable InterPodAffinity:\n%s", r.YAML)
				}
				if tc.ps.NodeImageLocality != nil {
					if _, dis := multiPointHas(iso.Plugins.MultiPoint, "ImageLocality"); !dis {
						t.Errorf("isolated profile lost the ImageLocality replacement")
					}
				}
				args := false
				for _, pc := range iso.PluginConfig {
					args = args || pc.Name == "InstanceIsolation"
				}
				if !args {
					t.Errorf("isolated profile lacks InstanceIsolation's args")
				}
			}
		})
	}
}
