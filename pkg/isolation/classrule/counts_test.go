package classrule

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// countsOf counts one non-exempt pod per entry: a class, "" for an unclassed pod, or "-class"
// to discount one.
func countsOf(entries []string) *Counts {
	c := &Counts{}
	for _, e := range entries {
		switch {
		case e == "":
			c.Add(nil, "", 1)
		case e[0] == '-':
			c.Add([]string{e[1:]}, "", -1)
		default:
			c.Add([]string{e}, "", 1)
		}
	}
	return c
}

// TestVerdict: the rule over a node's counts and a cycle's delta. The cached message for a node
// of one class and the ranged one for a node of several, or with a delta, say the same thing.
func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		name           string
		base, delta    []string // nil delta: none
		mine           string
		strict, spread bool
		want           string
	}{
		{name: "one other class", base: []string{"b", "b"}, mine: "a", want: "node holds instance class b"},
		{name: "own class only", base: []string{"a"}, mine: "a"},
		{name: "two classes, smallest other named", base: []string{"c", "b"}, mine: "a", want: "node holds instance class b"},
		{name: "own and another", base: []string{"a", "c"}, mine: "a", want: "node holds instance class c"},
		{name: "delta adds another", base: []string{"a"}, delta: []string{"b"}, mine: "a", want: "node holds instance class b"},
		{name: "delta removes the other", base: []string{"b"}, delta: []string{"-b"}, mine: "a"},
		{name: "empty", mine: "a"},
		{name: "unclassed pod beside a class", base: []string{"a"}},
		{name: "strict: unclassed pod beside a class", base: []string{"a"}, strict: true,
			want: "node holds instance class a (strict: pods without a class stay off classed nodes)"},
		{name: "strict: classed pod beside unclassed ones", base: []string{"a", ""}, delta: []string{""}, mine: "a", strict: true,
			want: "node holds 2 pod(s) without an instance class (strict)"},
		{name: "unclassed beside classed, not strict", base: []string{"a", ""}, mine: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := View{Base: countsOf(tc.base)}
			if tc.delta != nil {
				v.Delta = countsOf(tc.delta)
			}
			pc := &PodClass{}
			if tc.mine != "" {
				pc.Classes = []string{tc.mine}
			}
			if got := Verdict(v, pc, tc.strict, tc.spread); got != tc.want {
				t.Errorf("Verdict = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVerdictSpread(t *testing.T) {
	var base Counts
	base.AddPod(&PodClass{Classes: []string{"a"}, Owner: "rs-1"}, 1)
	for _, tc := range []struct {
		name   string
		owner  string
		spread bool
		want   string
	}{
		{"a replica of the same controller", "rs-1", true, "node already holds a replica of ReplicaSet/x (spreadReplicas)"},
		{"another controller", "rs-2", true, ""},
		{"not spreading", "rs-1", false, ""},
	} {
		pc := &PodClass{Classes: []string{"a"}, Owner: types.UID(tc.owner), OwnerRef: "ReplicaSet/x"}
		if got := Verdict(View{Base: &base}, pc, false, tc.spread); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCountsKeepSole: after any sequence of adds and removes, sole and soleMsg name the one
// class a node holds (none with zero or several), and Clone is a copy sharing no map.
func TestCountsKeepSole(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var c Counts
	held := map[string]int{}
	for step := 0; step < 2000; step++ {
		cls := []string{fmt.Sprint("c", rng.Intn(4))}
		if rng.Intn(5) == 0 {
			cls = append(cls, fmt.Sprint("c", 4+rng.Intn(2)))
		}
		n := 1
		if held[cls[0]] > 0 && rng.Intn(2) == 0 {
			n = -1
			for _, cl := range cls {
				if held[cl] == 0 {
					n = 1
				}
			}
		}
		c.AddPod(&PodClass{Classes: cls}, n)
		for _, cl := range cls {
			held[cl] += n
			if held[cl] == 0 {
				delete(held, cl)
			}
		}
		want := ""
		if len(held) == 1 {
			for cl := range held {
				want = cl
			}
		}
		if c.Sole() != want || (want != "" && c.soleMsg != refusalMsg(want)) || (want == "" && c.soleMsg != "") {
			t.Fatalf("step %d: holds %v: sole %q (%q), want %q", step, held, c.Sole(), c.soleMsg, want)
		}
		if s := c.Summary(); !reflect.DeepEqual(s.Classes, held) && !(len(s.Classes) == 0 && len(held) == 0) {
			t.Fatalf("step %d: summary %v, want %v", step, s.Classes, held)
		}
	}
	cl := c.Clone()
	cl.Add([]string{"new"}, "owner", 1)
	if c.Class("new") != 0 || len(c.owners) != 0 {
		t.Fatal("Clone shares its maps with the original")
	}
	if (*Counts)(nil).Clone() != nil {
		t.Fatal("Clone of nil")
	}
}

func TestCountsEmpty(t *testing.T) {
	var c Counts
	if !c.Empty() {
		t.Fatal("zero Counts not empty")
	}
	exempt := &PodClass{Exempt: true}
	c.AddPod(exempt, 1)
	if c.Empty() || c.Pods() != 1 || c.Classed() {
		t.Fatalf("an exempt pod counts in the pod total only: %+v", c.Summary())
	}
	c.AddPod(exempt, -1)
	if !c.Empty() {
		t.Fatalf("not empty after the pod left: %+v", c.Summary())
	}
}

// TestVerdictAllocates: the plugin's Filter calls Verdict on every node of every cycle; neither
// the accepting path nor the common refusal (a node of one other class) may allocate.
func TestVerdictAllocates(t *testing.T) {
	var base Counts
	for i := 0; i < 10; i++ {
		base.AddPod(&PodClass{Classes: []string{"a"}, Owner: types.UID(fmt.Sprint("rs", i))}, 1)
	}
	for _, mine := range []string{"a", "b"} {
		pc := &PodClass{Classes: []string{mine}, Owner: "new", OwnerRef: "ReplicaSet/new"}
		if n := testing.AllocsPerRun(100, func() { _ = Verdict(View{Base: &base}, pc, true, true) }); n != 0 {
			t.Errorf("incoming %s: %v allocations per Verdict", mine, n)
		}
	}
}
