package instanceisolation

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// ownedPlugin is a plugin fed through PodHandler whose grants the test sets: without an
// InstanceClass every class belongs to its pods' namespace.
func ownedPlugin(t *testing.T, a *Args) (*InstanceIsolation, *Grants) {
	t.Helper()
	g := NewGrants()
	pl := NewWithIndex(context.Background(), mustArgs(t, a), NewIndex(), g)
	pl.FollowGrants()
	return pl, g
}

// TestClassesBelongToNamespaces: the incident of issue 35 item 1 (namespace red labels its pod
// with blue's class) and its variants, decided by the effective class: (namespace, value)
// unless an InstanceClass shares the value, and then only with the namespaces it lists.
func TestClassesBelongToNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grants  map[string][]string
		placed  *v1.Pod
		pod     *v1.Pod
		refused string // "" fits; else the whole refusal
	}{
		{name: "the incident: red labels its pod with blue's class",
			placed: newPod("blue").class("blue").on("n1").pod(), pod: newPod("red").class("blue").pod(),
			refused: "node holds instance class blue/blue"},
		{name: "two namespaces using one value are two classes",
			placed: newPod("red").class("gold").on("n1").pod(), pod: newPod("blue").class("gold").pod(),
			refused: "node holds instance class red/gold"},
		{name: "same namespace, same value: one class",
			placed: newPod("red").class("gold").on("n1").pod(), pod: newPod("red").label("berth.dev/instance-class", "gold").pod()},
		{name: "shared class: namespaces of the grant share nodes", grants: map[string][]string{"gold": {"red", "blue"}},
			placed: newPod("red").class("gold").on("n1").pod(), pod: newPod("blue").class("gold").pod()},
		{name: "shared class: a namespace the grant does not list is another class", grants: map[string][]string{"gold": {"red", "blue"}},
			placed: newPod("red").class("gold").on("n1").pod(), pod: newPod("green").class("gold").pod(),
			refused: "node holds instance class gold (shared)"},
		{name: "shared class: the listed namespaces keep off an unlisted one's node", grants: map[string][]string{"gold": {"red", "blue"}},
			placed: newPod("green").class("gold").on("n1").pod(), pod: newPod("red").class("gold").pod(),
			refused: "node holds instance class green/gold"},
		{name: "a grant of another value changes nothing", grants: map[string][]string{"silver": {"red", "blue"}},
			placed: newPod("red").class("gold").on("n1").pod(), pod: newPod("blue").class("gold").pod(),
			refused: "node holds instance class red/gold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, g := ownedPlugin(t, nil)
			for v, ns := range tc.grants {
				g.Set(v, ns)
			}
			pl.PodHandler().OnAdd(tc.placed, false)
			s := filter(pl, tc.pod, "n1", tc.placed)
			if tc.refused == "" {
				if !s.IsSuccess() {
					t.Fatalf("refused: %v", s)
				}
				return
			}
			if s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != tc.refused {
				t.Fatalf("status %v %q, want UnschedulableAndUnresolvable %q", s.Code(), s.Message(), tc.refused)
			}
			// The snapshot path (the index not caught up) decides alike.
			fresh, g2 := ownedPlugin(t, nil)
			for v, ns := range tc.grants {
				g2.Set(v, ns)
			}
			if s := filter(fresh, tc.pod, "n1", tc.placed); s.Message() != tc.refused {
				t.Fatalf("from the snapshot: %q, want %q", s.Message(), tc.refused)
			}
		})
	}
}

// TestGrantChangesRekeyIndex: creating, narrowing and deleting an InstanceClass re-keys the
// pods already counted, so the next Filter and Score see the classes as they are now.
func TestGrantChangesRekeyIndex(t *testing.T) {
	pl, g := ownedPlugin(t, nil)
	red := newPod("red").class("gold").on("n1").pod()
	pl.PodHandler().OnAdd(red, false)
	blue := newPod("blue").class("gold").pod()
	steps := []struct {
		name    string
		change  func()
		refused string
		classes map[string]int
	}{
		{"no grant", func() {}, "node holds instance class red/gold", map[string]int{"red/gold": 1}},
		{"granted to red and blue", func() { g.Set("gold", []string{"red", "blue"}) }, "", map[string]int{"gold (shared)": 1}},
		{"narrowed to blue", func() { g.Set("gold", []string{"blue"}) }, "node holds instance class red/gold", map[string]int{"red/gold": 1}},
		{"granted to red only", func() { g.Set("gold", []string{"red"}) }, "node holds instance class gold (shared)", map[string]int{"gold (shared)": 1}},
		{"deleted", func() { g.Set("gold", nil) }, "node holds instance class red/gold", map[string]int{"red/gold": 1}},
	}
	for _, st := range steps {
		st.change()
		got := pl.Index().Summary()["n1"].Classes
		if len(got) != len(st.classes) {
			t.Fatalf("%s: index holds %v, want %v", st.name, got, st.classes)
		}
		for k, n := range st.classes {
			if got[k] != n {
				t.Fatalf("%s: index holds %v, want %v", st.name, got, st.classes)
			}
		}
		s := filter(pl, blue, "n1", red)
		if (st.refused == "") != s.IsSuccess() || (st.refused != "" && s.Message() != st.refused) {
			t.Fatalf("%s: Filter %v, want refused %q", st.name, s, st.refused)
		}
	}
}

// TestSignPodByEffectiveClass: pods of two namespaces with one value filter differently, so
// they must not share a signature; pods of one shared class do.
func TestSignPodByEffectiveClass(t *testing.T) {
	pl, g := ownedPlugin(t, nil)
	sig := func(p *v1.Pod) string {
		f, _ := pl.SignPod(context.Background(), p)
		return strings.Join(f[0].Value.(signature).Classes, ",")
	}
	a, b := newPod("red").class("gold").pod(), newPod("blue").class("gold").pod()
	if sig(a) == sig(b) {
		t.Fatalf("red and blue gold sign alike: %s", sig(a))
	}
	g.Set("gold", []string{"red", "blue"})
	if sig(a) != sig(b) || sig(a) != "gold (shared)" {
		t.Fatalf("shared gold signs %q and %q, want both %q", sig(a), sig(b), "gold (shared)")
	}
}
