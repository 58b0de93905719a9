package instanceisolation

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/classrule"
)

// summaryOf is the per-node summary the index should hold, computed the slow way from the
// scheduler's snapshot: every pod of every NodeInfo, classified.
func summaryOf(t *testing.T, pl *InstanceIsolation, snap *cache.Snapshot) map[string]NodeSummary {
	t.Helper()
	nis, err := snap.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]NodeSummary{}
	for _, ni := range nis {
		c := &classrule.Counts{}
		for _, pi := range ni.GetPods() {
			pc := pl.cls.Classify(pi.GetPod())
			c.AddPod(&pc, 1)
		}
		if !c.Empty() {
			out[ni.Node().Name] = c.Summary()
		}
	}
	return normalize(out)
}

// normalize makes empty maps nil so DeepEqual compares contents.
func normalize(m map[string]NodeSummary) map[string]NodeSummary {
	for k, s := range m {
		if len(s.Classes) == 0 {
			s.Classes = nil
		}
		if len(s.Owners) == 0 {
			s.Owners = nil
		}
		m[k] = s
	}
	return m
}

// TestIndexMatchesSchedulerSnapshot drives the scheduler's own cache and the plugin with the
// same event sequence the scheduler produces (informer add/update/delete of bound pods,
// assume+Reserve, bind confirmation, forget+Unreserve, relabels, terminations) and checks,
// after every step, that the index equals the per-node summary of the scheduler's snapshot.
// It also shows the snapshot contains assumed pods, which is why Reserve must count them.
func TestIndexMatchesSchedulerSnapshot(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			// why: the cache's background loop updates scheduler metrics, which must exist.
			metrics.Register()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			logger := klog.Background()
			pl := newTestPlugin(t, &Args{ExemptNamespaces: []string{"infra"}})
			h := pl.PodHandler()
			c := cache.New(ctx, nil, false, false)
			const nodes = 5
			for i := 0; i < nodes; i++ {
				c.AddNode(logger, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}})
			}
			snap := cache.NewEmptySnapshot()
			r := rand.New(rand.NewSource(seed))
			bound := map[types.UID]*v1.Pod{}
			assumed := map[types.UID]*v1.Pod{}
			classes := []string{"", "a", "b", "c"}
			newRandomPod := func() *v1.Pod {
				b := newPod([]string{"t1", "t2", "infra"}[r.Intn(3)])
				if cl := classes[r.Intn(len(classes))]; cl != "" {
					b.class(cl)
				}
				switch r.Intn(6) {
				case 0:
					b.owned("DaemonSet", "ds")
				case 1:
					b.mirror()
				case 2:
					b.owned("StatefulSet", fmt.Sprint("sts", r.Intn(2)))
				}
				return b.pod()
			}
			pick := func(m map[types.UID]*v1.Pod) *v1.Pod {
				// why: map order is random per run; pick by sorted position for a seeded replay.
				keys := make([]string, 0, len(m))
				for k := range m {
					keys = append(keys, string(k))
				}
				if len(keys) == 0 {
					return nil
				}
				sortStrings(keys)
				return m[types.UID(keys[r.Intn(len(keys))])]
			}
			sawAssumedInSnapshot := false
			for step := 0; step < 400; step++ {
				op := r.Intn(7)
				switch op {
				case 0: // bound pod appears (another scheduler, or spec.nodeName)
					p := newRandomPod()
					p.Spec.NodeName = fmt.Sprintf("n%d", r.Intn(nodes))
					must(t, c.AddPod(logger, p))
					h.OnAdd(p, false)
					bound[p.UID] = p
				case 1: // this scheduler assumes and reserves
					p := newRandomPod()
					p.Spec.NodeName = fmt.Sprintf("n%d", r.Intn(nodes))
					must(t, c.AssumePod(logger, p))
					if s := pl.Reserve(ctx, framework.NewCycleState(), p, p.Spec.NodeName); !s.IsSuccess() {
						t.Fatal(s)
					}
					assumed[p.UID] = p
				case 2: // the binding is observed
					p := pick(assumed)
					if p == nil {
						continue
					}
					pending := p.DeepCopy()
					pending.Spec.NodeName = ""
					must(t, c.AddPod(logger, p))
					h.OnUpdate(pending, p)
					delete(assumed, p.UID)
					bound[p.UID] = p
				case 3: // binding failed
					p := pick(assumed)
					if p == nil {
						continue
					}
					pl.Unreserve(ctx, framework.NewCycleState(), p, p.Spec.NodeName)
					must(t, c.ForgetPod(logger, p))
					delete(assumed, p.UID)
				case 4: // relabel: class change, class removal, or exemption label
					p := pick(bound)
					if p == nil {
						continue
					}
					np := p.DeepCopy()
					if cl := classes[r.Intn(len(classes))]; cl == "" {
						delete(np.Labels, "ipp-class")
					} else {
						np.Labels["ipp-class"] = cl
					}
					must(t, c.UpdatePod(logger, p, np))
					h.OnUpdate(p, np)
					bound[p.UID] = np
				case 5: // deleted
					p := pick(bound)
					if p == nil {
						continue
					}
					must(t, c.RemovePod(logger, p))
					h.OnDelete(p)
					delete(bound, p.UID)
				case 6: // terminated: the scheduler's informer reports a delete; an
					// unfiltered one an update to Succeeded.
					p := pick(bound)
					if p == nil {
						continue
					}
					must(t, c.RemovePod(logger, p))
					np := p.DeepCopy()
					np.Status.Phase = v1.PodSucceeded
					if r.Intn(2) == 0 {
						h.OnUpdate(p, np)
					} else {
						h.OnDelete(p)
					}
					delete(bound, p.UID)
				}
				must(t, c.UpdateSnapshot(logger, snap))
				want := summaryOf(t, pl, snap)
				got := normalize(pl.Index().Summary())
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (op %d): index\n%v\nsnapshot\n%v", step, op, got, want)
				}
				if len(assumed) > 0 {
					for _, p := range assumed {
						ni, err := snap.NodeInfos().Get(p.Spec.NodeName)
						if err != nil {
							t.Fatal(err)
						}
						for _, pi := range ni.GetPods() {
							sawAssumedInSnapshot = sawAssumedInSnapshot || pi.GetPod().UID == p.UID
						}
					}
				}
				if got, want := pl.Index().Assumed(), countNonExempt(pl, assumed); got != want {
					t.Fatalf("step %d: index holds %d assumed pods, want %d", step, got, want)
				}
			}
			if !sawAssumedInSnapshot {
				t.Fatal("no assumed pod was ever in the scheduler's snapshot; the premise of counting Reserve-d pods is wrong")
			}
		})
	}
}

func countNonExempt(pl *InstanceIsolation, m map[types.UID]*v1.Pod) int {
	n := 0
	for _, p := range m {
		if pc := pl.cls.Classify(p); !pc.Exempt {
			n++
		}
	}
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// TestIndexUnreserveAfterBinding: once the informer has seen the pod bound, a late Unreserve
// (a bind that timed out on the client but succeeded on the server) must not drop it.
func TestIndexUnreserveAfterBinding(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, nil)
	p := newPod("t1").class("a").on("n1").pod()
	_ = pl.Reserve(ctx, framework.NewCycleState(), p, "n1")
	pl.PodHandler().OnUpdate(p, p)
	pl.Unreserve(ctx, framework.NewCycleState(), p, "n1")
	if got := pl.Index().Summary()["n1"].Classes[classmarker.SharedClass("a")]; got != 1 {
		t.Fatalf("class a count %d after a late Unreserve, want 1", got)
	}
	// A relabel to an exempt shape removes the pod from the index.
	np := p.DeepCopy()
	np.Annotations[MirrorPodAnnotation] = "x"
	pl.PodHandler().OnUpdate(p, np)
	if s := pl.Index().Summary()["n1"]; len(s.Classes) != 0 || s.Pods != 1 {
		t.Fatalf("exempt pod must count only in the pod total: %+v", s)
	}
}
