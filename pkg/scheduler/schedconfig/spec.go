package schedconfig

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// specEntry is one plugin a SecondaryScheduler's spec.plugins sets: its table row, weight and
// typed args (the CR's own, not a copy).
type specEntry struct {
	plugin config.Plugin
	weight *int32
	args   runtime.Object
}

// specEntries lists the plugins ps sets, in the table's order. The SecondaryScheduler keeps a
// typed field per plugin (its CRD schema is the args' own), found here by the row's Field,
// so the renderer and the operator loop over the table instead of naming each plugin; the
// table test fails when a row has no field or a field no row.
func specEntries(ps *berthv1alpha1.PluginSet) []specEntry {
	v := reflect.ValueOf(ps).Elem()
	var out []specEntry
	for _, p := range config.Plugins {
		f, ok := pluginField(v, p.Field)
		if !ok || f.IsNil() {
			continue
		}
		e := specEntry{plugin: p}
		entry := f.Elem()
		if w := entry.FieldByName("Weight"); w.IsValid() && w.Kind() == reflect.Struct {
			e.weight = w.FieldByName("Weight").Interface().(*int32)
		}
		e.args = argsOf(entry, p)
		out = append(out, e)
	}
	return out
}

// pluginField is the pointer field of v whose JSON name is name.
func pluginField(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == name && t.Field(i).Type.Kind() == reflect.Pointer {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// argsOf is the address of the entry's args: its Args field, or for inline args the embedded
// field of the row's args type.
func argsOf(entry reflect.Value, p config.Plugin) runtime.Object {
	if !p.InlineArgs {
		return entry.FieldByName("Args").Addr().Interface().(runtime.Object)
	}
	want := reflect.TypeOf(p.NewArgs()).Elem()
	for i := 0; i < entry.NumField(); i++ {
		if entry.Type().Field(i).Type == want {
			return entry.Field(i).Addr().Interface().(runtime.Object)
		}
	}
	return nil
}
