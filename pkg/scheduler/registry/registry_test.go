package registry

import (
	"sort"
	"strings"
	"testing"

	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// TestRegistryMatchesTable: every row of the plugin table has a factory and every factory a
// row, so the renderer (which reads the table) never writes a plugin the scheduler lacks, and
// no plugin runs with args nobody registered or validates.
func TestRegistryMatchesTable(t *testing.T) {
	var table, reg []string
	for _, p := range config.Plugins {
		table = append(table, p.Name)
	}
	for name := range Plugins() {
		if _, bench := extra[name]; !bench {
			reg = append(reg, name)
		}
	}
	sort.Strings(table)
	sort.Strings(reg)
	if len(table) != len(reg) {
		t.Fatalf("table %v, registry %v", table, reg)
	}
	for i := range table {
		if table[i] != reg[i] {
			t.Fatalf("table %v, registry %v", table, reg)
		}
	}
}

// TestTableArgsDecodeForEachPlugin: each row's args kind is registered, defaults, and decodes
// strictly under its plugin's name (the table, not a switch, reaches every plugin).
func TestTableArgsDecodeForEachPlugin(t *testing.T) {
	for _, p := range config.Plugins {
		// All defaults are valid, but a load-aware plugin's watcher address has none.
		if ok, err := config.DecodeAndValidate(p.Name, nil); !ok || (err != nil && !strings.HasPrefix(err.Error(), "watcherAddress: Required value")) {
			t.Errorf("%s: ok %v, err %v", p.Name, ok, err)
		}
		kinds, _, err := config.Scheme.ObjectKinds(p.NewArgs())
		if err != nil || kinds[0].Kind != p.Name+"Args" {
			t.Errorf("%s: kinds %v, err %v", p.Name, kinds, err)
		}
	}
	if ok, _ := config.DecodeAndValidate("NoSuchPlugin", nil); ok {
		t.Error("an unknown plugin has a row")
	}
}
