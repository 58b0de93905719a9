package schedconfig

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// TestRenderNodeImageLocality: the plugin renders with its weight and args, replaces the
// in-tree ImageLocality in the profile (which the scheduler then really runs without), and a
// bad arg names the CR field.
func TestRenderNodeImageLocality(t *testing.T) {
	good := &berthv1alpha1.PluginSet{NodeImageLocality: &berthv1alpha1.NodeImageLocalityPlugin{
		Weight: berthv1alpha1.Weight{Weight: ptr.To[int32](5)},
		Args:   configv1.NodeImageLocalityArgs{AssumePulledFor: &metav1.Duration{Duration: 2 * time.Minute}, UseNodeStatus: ptr.To(false)},
	}}
	r, err := Render(cr(good, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	y := string(r.YAML)
	for _, want := range []string{"name: NodeImageLocality", "weight: 5", "assumePulledFor: 2m", "useNodeStatus: false"} {
		if !strings.Contains(y, want) {
			t.Errorf("rendered config lacks %q:\n%s", want, y)
		}
	}
	cfg, err := Validate(r.YAML)
	if err != nil {
		t.Fatal(err)
	}
	mp := cfg.Profiles[0].Plugins.MultiPoint
	disabled := false
	for _, d := range mp.Disabled {
		disabled = disabled || d.Name == "ImageLocality"
	}
	enabled := false
	for _, e := range mp.Enabled {
		if e.Name == "ImageLocality" {
			t.Errorf("in-tree ImageLocality still enabled next to NodeImageLocality")
		}
		enabled = enabled || e.Name == "NodeImageLocality"
	}
	if !disabled || !enabled {
		t.Errorf("multiPoint enabled %v disabled %v", mp.Enabled, mp.Disabled)
	}

	// Without the plugin, the in-tree one stays.
	r, err = Render(cr(&berthv1alpha1.PluginSet{SySched: &berthv1alpha1.SySchedPlugin{}}, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(r.YAML), "ImageLocality") {
		t.Errorf("ImageLocality touched without NodeImageLocality:\n%s", r.YAML)
	}

	bad := &berthv1alpha1.PluginSet{NodeImageLocality: &berthv1alpha1.NodeImageLocalityPlugin{
		Args: configv1.NodeImageLocalityArgs{AssumePulledFor: &metav1.Duration{Duration: 3 * time.Hour}}}}
	_, err = Render(cr(bad, nil), nil)
	if err == nil || !strings.Contains(err.Error(), "spec.plugins.nodeImageLocality.args") || !strings.Contains(err.Error(), "assumePulledFor") {
		t.Fatalf("err = %v, want it to name spec.plugins.nodeImageLocality.args and assumePulledFor", err)
	}
}
