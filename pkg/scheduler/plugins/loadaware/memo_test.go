package loadaware

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// memoScore depends on every input a plugin's score may read, so any stale reuse shows.
func memoScore(key int64) ScoreFunc {
	return func(st NodeState, ni fwk.NodeInfo) int64 {
		if st.Freshness != Fresh {
			return -1 - int64(st.Freshness)
		}
		return int64(st.Metrics.CPU.Avg*1000) + st.Unreported.MilliCPU*7 + st.CapacityMilliCPU(ni.Node())*13 + key*17
	}
}

// Random churn of everything a score depends on (placements from Reserve and from the
// informer, removals, load documents, the clock crossing pod and metrics expiry, node objects
// replaced, the pod's key): after every step the score PreScore prepares for each node equals
// the one computed afresh, and unchanged nodes are reused rather than computed.
func TestPreparedScoresEqualFreshScoresUnderChurn(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			now := time.Now()
			w := lat.NewWatcher()
			defer w.Close()
			e := newEngine(t, w.URL, func(a *CommonArgs) {
				metrics, pods := int64(60), int64(90)
				a.MetricsExpirySeconds, a.AssumedPodExpirySeconds = &metrics, &pods
			}, func() time.Time { return now })
			r := rand.New(rand.NewPCG(seed, 0))
			names := []string{"a", "b", "c", "d", "e", "f"}
			infos := make([]fwk.NodeInfo, len(names))
			setNode := func(i int, milliCPU int64) {
				ni := framework.NewNodeInfo()
				ni.SetNode(lat.Node(names[i], milliCPU, 8<<30))
				infos[i] = ni
			}
			for i := range names {
				setNode(i, 4000)
			}
			doc := func() {
				m := map[string]float64{}
				for _, n := range names {
					if r.IntN(4) != 0 {
						m[n] = float64(r.IntN(100))
					}
				}
				w.Set(lat.CPUDoc(now, m))
				if err := e.Watcher.Refresh(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			doc()
			key := int64(100)
			var reused int64
			for step := 0; step < 800; step++ {
				switch op := r.IntN(20); {
				case op < 6:
					e.Reserve(lat.Pod(fmt.Sprint("p", r.IntN(40))), names[r.IntN(len(names))])
				case op < 9:
					// The informer: a pod bound elsewhere, or one of ours moved.
					e.Tracker.Add(lat.Pod(fmt.Sprint("p", r.IntN(40))), names[r.IntN(len(names))], now.Add(-time.Duration(r.IntN(120))*time.Second))
				case op < 11:
					e.Unreserve(lat.Pod(fmt.Sprint("p", r.IntN(40))))
				case op < 13:
					now = now.Add(time.Duration(r.IntN(40)) * time.Second)
				case op < 14:
					doc()
				case op < 15:
					setNode(r.IntN(len(names)), int64(1000*(1+r.IntN(8))))
				case op < 16:
					key = int64(100 * r.IntN(3))
				default:
					// Nothing changes: the next cycle must reuse every score.
				}
				before, _ := e.MemoCounts()
				state := framework.NewCycleState()
				e.PrepareScores(state, infos, [2]int64{key}, memoScore(key))
				after, _ := e.MemoCounts()
				reused += after - before
				for i, ni := range infos {
					got, ok := e.PreparedScore(state, ni)
					if !ok {
						t.Fatalf("step %d: node %s has no prepared score", step, names[i])
					}
					if want := memoScore(key)(e.Node(names[i]), ni); got != want {
						t.Fatalf("step %d: node %s prepared score %d, fresh score %d", step, names[i], got, want)
					}
				}
				if _, ok := e.PreparedScore(framework.NewCycleState(), infos[0]); ok {
					t.Fatalf("step %d: a cycle PreScore did not prepare got a prepared score", step)
				}
			}
			if reused == 0 {
				t.Fatal("no score was ever reused")
			}
		})
	}
}

// The memo serves only the cycle PreScore prepared, only the nodes it was given, and nothing
// for a cycle that records its decision; an unchanged cycle reuses every node.
func TestPreparedScoreScope(t *testing.T) {
	now := time.Now()
	w := lat.NewWatcher()
	defer w.Close()
	e := newEngine(t, w.URL, nil, func() time.Time { return now })
	w.Set(lat.CPUDoc(now, map[string]float64{"a": 10, "b": 20}))
	if err := e.Watcher.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	info := func(name string) fwk.NodeInfo {
		ni := framework.NewNodeInfo()
		ni.SetNode(lat.Node(name, 4000, 8<<30))
		return ni
	}
	a, b := info("a"), info("b")
	s1 := framework.NewCycleState()
	e.PrepareScores(s1, []fwk.NodeInfo{a}, [2]int64{1}, memoScore(1))
	if _, ok := e.PreparedScore(s1, a); !ok {
		t.Error("prepared node has no score")
	}
	if _, ok := e.PreparedScore(s1, b); ok {
		t.Error("node PreScore was not given has a score")
	}
	s2 := framework.NewCycleState()
	e.PrepareScores(s2, []fwk.NodeInfo{a, b}, [2]int64{1}, memoScore(1))
	if _, ok := e.PreparedScore(s1, a); ok {
		t.Error("the previous cycle's state still reads prepared scores")
	}
	hits, misses := e.MemoCounts()
	if hits != 1 || misses != 2 {
		t.Errorf("hits/misses %d/%d, want 1/2 (a reused, b computed)", hits, misses)
	}
	// The state a node was scored from in a cycle is what explains its score (a decision
	// record); a node the cycle did not score reads the state now, and so does an older cycle.
	if st := e.PreparedState(s2, a.Node()); st.Freshness != Fresh {
		t.Errorf("prepared state of a: %+v", st)
	}
	if _, ok := e.memo.Stamp(s1, a.Node()); ok {
		t.Error("a stamp served for a cycle that is over")
	}
	if _, ok := e.memo.Stamp(s2, info("c").Node()); ok {
		t.Error("a stamp served for a node the cycle did not score")
	}
	// A node object the cache replaced is computed afresh, and the old one's entry is dropped
	// at the next document.
	a2 := info("a")
	e.PrepareScores(framework.NewCycleState(), []fwk.NodeInfo{a2, b}, [2]int64{1}, memoScore(1))
	if _, misses2 := e.MemoCounts(); misses2 != misses+1 {
		t.Errorf("replaced node object: %d computed, want 1", misses2-misses)
	}
	w.Set(lat.CPUDoc(now, map[string]float64{"a": 10, "b": 20}))
	if err := e.Watcher.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.PrepareScores(framework.NewCycleState(), []fwk.NodeInfo{a2, b}, [2]int64{1}, memoScore(1))
	if n := e.memo.Len(); n != 2 {
		t.Errorf("%d memo entries after the replaced node object left, want 2", n)
	}
}
