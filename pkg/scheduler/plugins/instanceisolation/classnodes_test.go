package instanceisolation

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// checkDerived compares what the index keeps beside its counts (per-class node sets, each
// node's sole class, the number of classed nodes and of nodes per sole
// class) with what they must be, recomputed from the counts.
func checkDerived(t *testing.T, ix *Index, step string) {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	want := map[string]map[string]bool{}
	classed, sole := 0, map[string]int{}
	for node, c := range ix.nodes {
		classes := c.Summary().Classes
		if len(classes) > 0 {
			classed++
		}
		if len(classes) == 1 {
			for cl := range classes {
				sole[cl]++
			}
		}
		for cl, n := range classes {
			if n <= 0 {
				t.Fatalf("%s: node %s holds %d pods of class %s", step, node, n, cl)
			}
			if want[cl] == nil {
				want[cl] = map[string]bool{}
			}
			want[cl][node] = true
		}
		// why: classrule's tests check the sole class's message; the index must agree on
		// the class, which its per-class node counts follow.
		wantSole := ""
		if len(classes) == 1 {
			for cl := range classes {
				wantSole = cl
			}
		}
		if c.Sole() != wantSole {
			t.Fatalf("%s: node %s classes %v: sole %q, want %q", step, node, classes, c.Sole(), wantSole)
		}
	}
	if ix.classed != classed || len(ix.soleNodes) != len(sole) {
		t.Fatalf("%s: %d classed nodes, %d classes with sole nodes; counts say %d, %v", step, ix.classed, len(ix.soleNodes), classed, sole)
	}
	for cl, n := range sole {
		if ix.soleNodes[cl] != n {
			t.Fatalf("%s: class %s alone on %d nodes, counts say %d", step, cl, ix.soleNodes[cl], n)
		}
	}
	if len(ix.classNodes) != len(want) {
		t.Fatalf("%s: classNodes has %d classes, counts %d", step, len(ix.classNodes), len(want))
	}
	for cl, nodes := range want {
		got := ix.classNodes[cl]
		if len(got) != len(nodes) {
			t.Fatalf("%s: class %s on %d nodes by classNodes, %d by counts", step, cl, len(got), len(nodes))
		}
		for n := range nodes {
			if _, ok := got[n]; !ok {
				t.Fatalf("%s: class %s: node %s missing from classNodes", step, cl, n)
			}
		}
	}
}

// TestClassNodesFollowCounts drives the index with random binds, moves, relabels, Reserve,
// Unreserve and deletes of pods with zero, one or two classes (and exempt ones), and checks
// after each step that the per-class node sets and each node's sole class agree with the
// counts; that a set read earlier is never changed by later writes; and that Score, from the
// set PreScore reads, gives what the index's own lookup gives on every node.
func TestClassNodesFollowCounts(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			pl := newTestPlugin(t, nil)
			h := pl.PodHandler()
			nodes := []string{"n0", "n1", "n2", "n3", "n4", "n5"}
			classes := []string{"a", "b", "c"}
			var live []*v1.Pod
			type frozen struct {
				cl   string
				set  map[string]struct{}
				copy map[string]bool
			}
			var kept []frozen
			for step := 0; step < 400; step++ {
				switch op := r.Intn(10); {
				case op < 4 || len(live) == 0:
					b := newPod("t1")
					switch r.Intn(6) {
					case 0:
					case 1:
						b.owned("DaemonSet", "ds")
						b.class(classes[r.Intn(len(classes))])
					case 2:
						b.class(classes[r.Intn(len(classes))]).label("berth.dev/instance-class", classes[r.Intn(len(classes))])
					default:
						b.class(classes[r.Intn(len(classes))])
					}
					p := b.on(nodes[r.Intn(len(nodes))]).pod()
					if r.Intn(3) == 0 {
						_ = pl.Reserve(context.Background(), nil, p, p.Spec.NodeName)
					} else {
						h.OnAdd(p, false)
					}
					live = append(live, p)
				case op < 6:
					i := r.Intn(len(live))
					old := live[i].DeepCopy()
					p := live[i]
					if r.Intn(2) == 0 {
						p.Spec.NodeName = nodes[r.Intn(len(nodes))]
					} else {
						p.Labels["ipp-class"] = classes[r.Intn(len(classes))]
					}
					h.OnUpdate(old, p)
				case op < 7:
					i := r.Intn(len(live))
					pl.Unreserve(context.Background(), nil, live[i], live[i].Spec.NodeName)
				default:
					i := r.Intn(len(live))
					h.OnDelete(live[i])
					live = append(live[:i], live[i+1:]...)
				}
				st := fmt.Sprintf("step %d", step)
				checkDerived(t, pl.index, st)
				for _, k := range kept {
					if len(k.set) != len(k.copy) {
						t.Fatalf("%s: a class %s set read earlier changed size", st, k.cl)
					}
					for n := range k.copy {
						if _, ok := k.set[n]; !ok {
							t.Fatalf("%s: a class %s set read earlier lost %s", st, k.cl, n)
						}
					}
				}
				cl := classes[r.Intn(len(classes))]
				set := pl.index.nodesOf(classmarker.SharedClass(cl))
				cp := map[string]bool{}
				for n := range set {
					cp[n] = true
				}
				kept = append(kept, frozen{cl, set, cp})

				pod := newPod("t2").class(cl).pod()
				cs := framework.NewCycleState()
				if _, s := pl.PreFilter(context.Background(), cs, pod, nil); !s.IsSuccess() {
					t.Fatal(s)
				}
				if s := pl.PreScore(context.Background(), cs, pod, nil); !s.IsSuccess() {
					t.Fatal(s)
				}
				for _, n := range append(nodes, "unknown") {
					got, s := pl.Score(context.Background(), cs, pod, nodeInfo(n))
					want := int64(0)
					if pl.index.holds(n, classmarker.SharedClass(cl)) {
						want = 100
					}
					if !s.IsSuccess() || got != want {
						t.Fatalf("%s: class %s on %s: Score %d (%v), index says %d", st, cl, n, got, s, want)
					}
				}
			}
		})
	}
}
