package nodememo

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

func info(name string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return ni
}

// stamp: a node's score is 10 × the version of a per-node value it was computed at.
type stamp struct {
	name    string
	version int
}

type harness struct {
	m        Memo[stamp]
	version  map[string]int
	computed []string
	previous []stamp
}

func (h *harness) cycle(nodes ...fwk.NodeInfo) fwk.CycleState {
	h.computed, h.previous = nil, nil
	state := framework.NewCycleState()
	h.m.Prepare(state, nodes,
		func(s *stamp) bool { return s.version == h.version[s.name] },
		func(ni fwk.NodeInfo, s *stamp) int64 {
			h.computed = append(h.computed, ni.Node().Name)
			h.previous = append(h.previous, *s)
			*s = stamp{name: ni.Node().Name, version: h.version[ni.Node().Name]}
			return int64(10 * s.version)
		})
	return state
}

func (h *harness) score(t *testing.T, state fwk.CycleState, ni fwk.NodeInfo, want int64) {
	t.Helper()
	got, ok := h.m.Score(state, ni)
	if !ok || got != want {
		t.Errorf("node %s: score %d (prepared %v), want %d", ni.Node().Name, got, ok, want)
	}
}

func TestPrepareReusesValidStampsAndServesOnlyItsCycle(t *testing.T) {
	h := &harness{version: map[string]int{"a": 1, "b": 1}}
	a, b := info("a"), info("b")

	s1 := h.cycle(a, b)
	if !slices.Equal(h.computed, []string{"a", "b"}) {
		t.Fatalf("first cycle computed %v, want a and b", h.computed)
	}
	h.score(t, s1, a, 10)

	h.version["b"] = 2
	s2 := h.cycle(a, b)
	if !slices.Equal(h.computed, []string{"b"}) {
		t.Fatalf("after b changed computed %v, want only b", h.computed)
	}
	if h.previous[0] != (stamp{"b", 1}) {
		t.Errorf("compute saw stamp %+v, want b's previous one", h.previous[0])
	}
	h.score(t, s2, a, 10)
	h.score(t, s2, b, 20)
	if hits, misses := h.m.Counts(); hits != 1 || misses != 3 {
		t.Errorf("hits/misses %d/%d, want 1/3", hits, misses)
	}

	// Only the current cycle's state, only the nodes it prepared; the stamps likewise.
	if _, ok := h.m.Score(s1, a); ok {
		t.Error("an earlier cycle's state got a prepared score")
	}
	s3 := h.cycle(a)
	if _, ok := h.m.Score(s3, b); ok {
		t.Error("a node this cycle did not prepare got a score")
	}
	if _, ok := h.m.Score(framework.NewCycleState(), a); ok {
		t.Error("a state never prepared got a score")
	}
	if st, ok := h.m.Stamp(s3, a.Node()); !ok || st != (stamp{"a", 1}) {
		t.Errorf("stamp of a in the current cycle: %+v %v", st, ok)
	}
	if _, ok := h.m.Stamp(s3, b.Node()); ok {
		t.Error("a stamp for a node this cycle did not prepare")
	}
	if _, ok := h.m.Stamp(s2, a.Node()); ok {
		t.Error("a stamp for an earlier cycle")
	}

	// A replaced node object is a new entry; Sweep drops what the last cycle did not see.
	a2 := info("a")
	h.cycle(a2, b)
	if !slices.Equal(h.computed, []string{"a"}) || h.previous[0] != (stamp{}) {
		t.Errorf("replaced node object: computed %v from %+v, want a from a zero stamp", h.computed, h.previous)
	}
	if n := h.m.Len(); n != 3 {
		t.Errorf("%d entries before Sweep, want 3", n)
	}
	h.m.Sweep()
	if n := h.m.Len(); n != 2 {
		t.Errorf("%d entries after Sweep, want 2", n)
	}
}

// Score finds every prepared node of a large cycle (colliding slots included) and no other,
// through both of the tables used in turn.
func TestScoreFindsEveryPreparedNode(t *testing.T) {
	var m Memo[struct{}]
	nodes := make([]fwk.NodeInfo, 1000)
	for i := range nodes {
		nodes[i] = info(fmt.Sprint("n", i))
	}
	score := map[fwk.NodeInfo]int64{}
	for i, ni := range nodes {
		score[ni] = int64(i)
	}
	for round := 0; round < 3; round++ {
		prepared := nodes[round*100 : round*100+500]
		state := framework.NewCycleState()
		m.Prepare(state, prepared, func(*struct{}) bool { return false },
			func(ni fwk.NodeInfo, _ *struct{}) int64 { return score[ni] + int64(round) })
		for i, ni := range nodes {
			got, ok := m.Score(state, ni)
			in := i >= round*100 && i < round*100+500
			if ok != in || (in && got != score[ni]+int64(round)) {
				t.Fatalf("round %d node %d: score %d prepared %v, want prepared %v with %d", round, i, got, ok, in, score[ni]+int64(round))
			}
		}
	}
}

// A cycle with no nodes (PreScore without candidates, or a plugin test) prepares nothing and
// Score says so, on a fresh memo and after a Sweep alike.
func TestEmptyCycles(t *testing.T) {
	h := &harness{version: map[string]int{"a": 1}}
	a := info("a")
	for _, step := range []string{"fresh", "after a cycle and a Sweep"} {
		s := h.cycle()
		if _, ok := h.m.Score(s, a); ok {
			t.Errorf("%s: a node got a score from a cycle without nodes", step)
		}
		if _, ok := h.m.Stamp(s, a.Node()); ok {
			t.Errorf("%s: a node got a stamp from a cycle without nodes", step)
		}
		h.score(t, h.cycle(a), a, 10)
		h.m.Sweep()
		h.m.Sweep()
	}
	if n := h.m.Len(); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
}

// BenchmarkCycle is one burst cycle as the full profile runs it: 1000 nodes known, ~420
// prepared (the framework's adaptive share at 1000 nodes, from a rotating start), every stamp
// still valid but the last cycle's chosen node, then one Score per prepared node.
func BenchmarkCycle(b *testing.B) {
	const known, perCycle = 1000, 420
	nodes := make([]fwk.NodeInfo, known)
	for i := range nodes {
		nodes[i] = info(fmt.Sprint("n", i))
	}
	version := make(map[*v1.Node]*int, known)
	for _, ni := range nodes {
		version[ni.Node()] = new(int)
	}
	type st struct {
		v    *int
		seen int
	}
	var m Memo[st]
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := (i * perCycle) % known
		cycle := make([]fwk.NodeInfo, 0, perCycle)
		for j := 0; j < perCycle; j++ {
			cycle = append(cycle, nodes[(start+j)%known])
		}
		*version[cycle[i%perCycle].Node()]++
		state := framework.NewCycleState()
		m.Prepare(state, cycle,
			func(s *st) bool { return *s.v == s.seen },
			func(ni fwk.NodeInfo, s *st) int64 {
				v := version[ni.Node()]
				*s = st{v: v, seen: *v}
				return int64(*v)
			})
		for _, ni := range cycle {
			if _, ok := m.Score(state, ni); !ok {
				b.Fatal("prepared node not found")
			}
		}
	}
}
