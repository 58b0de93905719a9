package classrule

import (
	"slices"
	"testing"
)

func TestGrants(t *testing.T) {
	g := NewGrants()
	var told []string
	g.Subscribe(func(v string) { told = append(told, v) })
	steps := []struct {
		name   string
		change func()
		ns     string
		want   string
	}{
		{"no grant: the namespace's own", func() {}, "red", "red/gold"},
		{"granted: shared", func() { g.Set("gold", []string{"red", "blue"}) }, "red", "gold (shared)"},
		{"granted: a namespace not listed keeps its own", func() {}, "green", "green/gold"},
		{"narrowed", func() { g.Set("gold", []string{"blue"}) }, "red", "red/gold"},
		{"deleted", func() { g.Set("gold", nil) }, "blue", "blue/gold"},
	}
	for _, st := range steps {
		st.change()
		if got := g.Effective(st.ns, "gold"); got != st.want {
			t.Fatalf("%s: %q, want %q", st.name, got, st.want)
		}
	}
	if !slices.Equal(told, []string{"gold", "gold", "gold"}) {
		t.Fatalf("subscribers told %q, want gold three times", told)
	}
	var none *Grants
	if got := none.Effective("red", "gold"); got != "red/gold" || !none.HasSynced() {
		t.Fatalf("nil grants: %q, synced %v", got, none.HasSynced())
	}
}

func TestGrantsHasSynced(t *testing.T) {
	g := NewGrants()
	if !g.HasSynced() {
		t.Fatal("grants fed by no informer must count as synced")
	}
	listed := false
	g.SetSynced(func() bool { return listed })
	if g.HasSynced() {
		t.Fatal("synced before the informer listed")
	}
	listed = true
	if !g.HasSynced() {
		t.Fatal("not synced after the informer listed")
	}
}
