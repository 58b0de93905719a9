package loadaware

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-sched/berth/pkg/loadapi"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// reference is what Engine.Node's lock-free read must equal: the sum over every tracked pod of
// the node, computed from the authoritative byUID index under the lock.
func reference(e *Engine, node string) Estimate {
	now := e.now()
	v := e.Watcher.Snapshot().Node(node, now, e.expiry)
	e.Tracker.mu.Lock()
	defer e.Tracker.mu.Unlock()
	var sum Estimate
	for _, p := range e.Tracker.byUID {
		if p.node == node {
			r, _, _ := e.Tracker.remaining(p, v, Capacity{}, now)
			sum.add(r)
		}
	}
	return sum
}

// Score reads a node's placed pods through the bucket its snapshot entry points at; these
// steps are the orders in which that link could go stale (pods placed before the node is in
// any document, emptied buckets, nodes leaving and coming back to the document).
func TestNodeReadsFollowTrackerAcrossSnapshots(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	w := lat.NewWatcher()
	defer w.Close()
	e := newEngine(t, w.URL, nil, clock)
	doc := func(nodes ...string) {
		t.Helper()
		m := map[string]float64{}
		for _, n := range nodes {
			m[n] = 30
		}
		w.Set(lat.CPUDoc(now, m))
		if err := e.Watcher.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	reserve := func(pod, node string) { e.Reserve(lat.Pod(pod), node) }
	unreserve := func(pod string) { e.Unreserve(lat.Pod(pod)) }
	type check struct {
		node string
		want int64 // milli-CPU not yet in the node's report
		// viaBucket: the snapshot's entry for the node carries the tracker's bucket.
		viaBucket bool
	}
	steps := []struct {
		name   string
		do     func()
		checks []check
	}{
		{"placed before the node is in any document", func() { reserve("p1", "a") }, []check{{"a", 100, false}}},
		{"document names a and b", func() { doc("a", "b") }, []check{{"a", 100, true}, {"b", 0, true}}},
		{"placed after the document", func() { reserve("p2", "a"); reserve("p3", "b") }, []check{{"a", 200, true}, {"b", 100, true}}},
		{"bucket emptied but kept", func() { unreserve("p1"); unreserve("p2") }, []check{{"a", 0, true}}},
		{"emptied bucket still read", func() { reserve("p4", "a") }, []check{{"a", 100, true}}},
		{"node outside the document", func() { reserve("p5", "c") }, []check{{"c", 100, false}}},
		{"a leaves, c joins", func() { doc("b", "c") }, []check{{"a", 100, false}, {"b", 100, true}, {"c", 100, true}}},
		{"a's bucket dropped once empty", func() { unreserve("p4") }, []check{{"a", 0, false}}},
		{"a gets a new bucket", func() { reserve("p6", "a") }, []check{{"a", 100, false}}},
		{"a comes back", func() { doc("a", "b", "c") }, []check{{"a", 100, true}, {"b", 100, true}, {"c", 100, true}}},
		{"moved pod counts once, on its new node", func() { e.Tracker.Add(lat.Pod("p6"), "c", now) }, []check{{"a", 0, true}, {"c", 200, true}}},
	}
	for _, s := range steps {
		s.do()
		for _, c := range s.checks {
			st := e.Node(c.node)
			if st.Unreported.MilliCPU != c.want {
				t.Errorf("%s: node %s unreported %dm, want %dm", s.name, c.node, st.Unreported.MilliCPU, c.want)
			}
			if ref := reference(e, c.node); ref != st.Unreported {
				t.Errorf("%s: node %s read %+v, tracker says %+v", s.name, c.node, st.Unreported, ref)
			}
			var b *bucket
			if _, en := e.Watcher.Snapshot().node(c.node, now, e.expiry); en != nil {
				b = en.bucket
			}
			if (b != nil) != c.viaBucket {
				t.Errorf("%s: node %s read through a bucket = %v, want %v", s.name, c.node, b != nil, c.viaBucket)
			}
			if b != nil && b != e.Tracker.byNode[c.node] {
				t.Errorf("%s: node %s: snapshot holds a bucket the tracker no longer has", s.name, c.node)
			}
		}
	}
	// Empty buckets of nodes no document names do not pile up.
	unreserve("p3")
	unreserve("p5")
	unreserve("p6")
	doc("z")
	if n := len(e.Tracker.byNode); n != 1 {
		t.Errorf("%d buckets left after every pod went and the document names one node, want 1", n)
	}
}

// Random churn of reservations, moves and documents: the lock-free read equals the tracker's
// own sum for every node after every step.
func TestNodeReadsMatchTrackerUnderChurn(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			now := time.Now()
			w := lat.NewWatcher()
			defer w.Close()
			e := newEngine(t, w.URL, nil, func() time.Time { return now })
			r := rand.New(rand.NewPCG(seed, 0))
			nodes := []string{"a", "b", "c", "d", "e"}
			for step := 0; step < 600; step++ {
				switch op := r.IntN(10); {
				case op < 5:
					e.Tracker.Add(lat.Pod(fmt.Sprint("p", r.IntN(30))), nodes[r.IntN(len(nodes))], now)
				case op < 8:
					e.Unreserve(lat.Pod(fmt.Sprint("p", r.IntN(30))))
				default:
					m := map[string]float64{}
					for _, n := range nodes {
						if r.IntN(2) == 0 {
							m[n] = 40
						}
					}
					w.Set(lat.CPUDoc(now, m))
					if err := e.Watcher.Refresh(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				for _, n := range nodes {
					if got, want := e.Node(n).Unreported, reference(e, n); got != want {
						t.Fatalf("step %d: node %s read %+v, tracker says %+v", step, n, got, want)
					}
				}
			}
		})
	}
}

// The capacity Score reads is cached per node object: a node updated by the API (a new object
// in the scheduler's cache) must be read afresh, an unchanged one must not need parsing.
func TestCapacityFollowsNodeObject(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"a": 10}))
	e := newEngine(t, w.URL, nil, nil)
	if err := e.Watcher.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	a4, a8, b2 := lat.Node("a", 4000, 1<<30), lat.Node("a", 8000, 1<<30), lat.Node("b", 2000, 1<<30)
	steps := []struct {
		name string
		node string
		obj  *v1.Node
		want int64
	}{
		{"first read parses", "a", a4, 4000},
		{"same object, cached", "a", a4, 4000},
		{"updated object read afresh", "a", a8, 8000},
		{"node not in the document", "b", b2, 2000},
	}
	for _, s := range steps {
		if got := e.Node(s.node).CapacityMilliCPU(s.obj); got != s.want {
			t.Errorf("%s: capacity %dm, want %dm", s.name, got, s.want)
		}
	}
	// The cache holds the object it was computed from; a stale value under the old object is
	// never returned for the new one even if the old is read again.
	if got := e.Node("a").CapacityMilliCPU(a4); got != 4000 {
		t.Errorf("old object: %dm, want 4000m", got)
	}
}

// The snapshot keys its nodes by names cut from one string: each name must still find its own
// node's numbers, whatever the names' lengths and whichever part of the document named them.
func TestSnapshotKeysFindTheirOwnNodes(t *testing.T) {
	now := time.Now()
	cpu := map[string]float64{}
	nodes := map[string]loadapi.NodeStatus{}
	for i := 0; i < 300; i++ {
		name := fmt.Sprintf("n%0*d", 1+i%17, i) // lengths 2..18
		if i%3 != 2 {
			cpu[name] = float64(i % 100)
		}
		if i%3 != 0 {
			nodes[name] = loadapi.NodeStatus{Updated: now.Unix(), Stale: i%5 == 0}
		}
	}
	doc := lat.CPUDoc(now, cpu)
	doc.Nodes = nodes
	s := NewSnapshot(doc, now, now)
	for i := 0; i < 300; i++ {
		name := fmt.Sprintf("n%0*d", 1+i%17, i)
		v := s.Node(name, now, time.Minute)
		want := Fresh
		switch {
		case i%3 != 0 && i%5 == 0:
			want = Stale
		case i%3 == 2:
			want = Missing
		}
		if v.Freshness != want {
			t.Errorf("%s: %v, want %v", name, v.Freshness, want)
		}
		if _, inDoc := cpu[name]; inDoc && v.Metrics.CPU.Avg != float64(i%100) {
			t.Errorf("%s: CPU %v, want %d", name, v.Metrics.CPU.Avg, i%100)
		}
	}
	if len(s.nodes) != 300 {
		t.Errorf("%d nodes in the snapshot, want 300", len(s.nodes))
	}
}
