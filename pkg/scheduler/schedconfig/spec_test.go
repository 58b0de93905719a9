package schedconfig

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// TestTableMatchesPluginSet: each row of the plugin table names a field of
// SecondaryScheduler's spec.plugins whose args are the row's type, and each plugin field of
// spec.plugins has a row, so the renderer and the operator's validation (loops over the table)
// miss no plugin a user can set.
func TestTableMatchesPluginSet(t *testing.T) {
	v := reflect.ValueOf(&berthv1alpha1.PluginSet{}).Elem()
	rows := map[string]bool{}
	for _, p := range config.Plugins {
		rows[p.Field] = true
		f, ok := pluginField(v, p.Field)
		if !ok {
			t.Errorf("%s: no spec.plugins.%s", p.Name, p.Field)
			continue
		}
		f.Set(reflect.New(f.Type().Elem()))
		args := argsOf(f.Elem(), p)
		if args == nil || reflect.TypeOf(args) != reflect.TypeOf(p.NewArgs()) {
			t.Errorf("%s: spec.plugins.%s holds args %T, the table %T", p.Name, p.Field, args, p.NewArgs())
		}
	}
	for i := 0; i < v.NumField(); i++ {
		sf := v.Type().Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Type.Kind() == reflect.Pointer && !rows[name] {
			t.Errorf("spec.plugins.%s has no row in the plugin table", name)
		}
	}
	if got := len(specEntries(v.Addr().Interface().(*berthv1alpha1.PluginSet))); got != len(config.Plugins) {
		t.Errorf("a set with every field set gave %d entries, want %d", got, len(config.Plugins))
	}
}

// TestRendererLinksNoPlugin: the operator and the rebalancer import this package; it reaches
// the args through the table, never a plugin's code (or the registry, which links them all).
func TestRendererLinksNoPlugin(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "berth/pkg/scheduler/plugins/") || strings.HasSuffix(dep, "berth/pkg/scheduler/registry") {
			t.Errorf("schedconfig links %s", dep)
		}
	}
}
