package loadaware

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/workloadprofile"
)

// replica is a pod of ReplicaSet rs in namespace ns, bound to node at bound.
func replica(ns, rs, name, node string, bound time.Time) *v1.Pod {
	yes := true
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name),
			Labels:            map[string]string{workloadprofile.PodTemplateHashLabel: "h1"},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs, UID: types.UID(rs), Controller: &yes}},
			CreationTimestamp: metav1.NewTime(bound)},
		Spec: v1.PodSpec{NodeName: node},
	}
}

// measured is a typed document in which node reports the pods using cpu % of the node each
// on average over the 15m window, and 3 × cpu in the latest sample, sampled at at.
func measured(at time.Time, node string, cpu map[types.UID]float64) *Snapshot {
	nl := loadapi.NodeLoad{Updated: at.Unix(), CPU: &loadapi.ResourceLoad{Avg: 30}, Memory: &loadapi.ResourceLoad{Avg: 30}}
	for uid, c := range cpu {
		nl.PodUIDs = append(nl.PodUIDs, string(uid))
		nl.Pods = append(nl.Pods, loadapi.PodUsage{UID: string(uid), Latest: loadapi.Latest{CPU: 3 * c, Memory: 3}, Windows: []loadapi.PodWindow{{Window: "15m", CPU: c, Memory: 1}}})
	}
	return NewLoadSnapshot(&loadapi.Load{Timestamp: at.Unix(), Window: "15m", Nodes: map[string]loadapi.NodeLoad{node: nl}}, at, time.Time{})
}

// Each case: which pods are bound where, what node n1 reports, and what a new replica of rs
// "web" in namespace "a" then counts at (the spec rule: 1000m).
func TestProfileEstimates(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	old := now.Add(-time.Hour) // longer than the window: averages count as they are
	three := []*v1.Pod{replica("a", "web", "p1", "n1", old), replica("a", "web", "p2", "n1", old), replica("a", "web", "p3", "n1", old)}
	for _, tc := range []struct {
		name   string
		bound  []*v1.Pod
		cpu    map[types.UID]float64 // % of n1
		want   int64
		source string
		reason string
	}{
		{"three alike replicas: profile", three, map[types.UID]float64{"a-p1": 2, "a-p2": 2, "a-p3": 2}, 200, decisionapi.EstimateFromProfile, ""},
		{"two measured: spec", three, map[types.UID]float64{"a-p1": 2, "a-p2": 2}, 1000, decisionapi.EstimateFromSpec, workloadprofile.ReasonTooFew},
		{"one hot, rest idle: spec", three, map[types.UID]float64{"a-p1": 40, "a-p2": 0.1, "a-p3": 0.1}, 1000, decisionapi.EstimateFromSpec, workloadprofile.ReasonUnlike},
		{"reported by a node they are not bound to: never learned",
			[]*v1.Pod{replica("a", "web", "p1", "n2", old), replica("a", "web", "p2", "n2", old), replica("a", "web", "p3", "n2", old)},
			map[types.UID]float64{"a-p1": 2, "a-p2": 2, "a-p3": 2}, 1000, decisionapi.EstimateFromSpec, ReasonNotMeasured},
		{"same owner UID in another namespace: never joins",
			[]*v1.Pod{replica("b", "web", "p1", "n1", old), replica("b", "web", "p2", "n1", old), replica("b", "web", "p3", "n1", old)},
			map[types.UID]float64{"b-p1": 2, "b-p2": 2, "b-p3": 2}, 1000, decisionapi.EstimateFromSpec, ReasonNotMeasured},
		{"started seconds ago: not learned yet",
			[]*v1.Pod{replica("a", "web", "p1", "n1", now), replica("a", "web", "p2", "n1", now), replica("a", "web", "p3", "n1", now)},
			map[types.UID]float64{"a-p1": 2, "a-p2": 2, "a-p3": 2}, 1000, decisionapi.EstimateFromSpec, ReasonNotMeasured},
		// 5 of 15 minutes: how much of the window average is the zeros before the pod ran is
		// unknown; the latest share (3 × 1 %) counts.
		{"younger than the window: its latest share",
			[]*v1.Pod{replica("a", "web", "p1", "n1", now.Add(-5*time.Minute)), replica("a", "web", "p2", "n1", now.Add(-5*time.Minute)), replica("a", "web", "p3", "n1", now.Add(-5*time.Minute))},
			map[types.UID]float64{"a-p1": 1, "a-p2": 1, "a-p3": 1}, 300, decisionapi.EstimateFromProfile, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := learnedEngine(t, defaulted("http://unused", nil), now, tc.bound, tc.cpu)
			incoming := replica("a", "web", "p4", "", time.Time{})
			if got := e.Tracker.estimate(incoming).MilliCPU; got != tc.want {
				t.Errorf("new replica counts %dm, want %dm", got, tc.want)
			}
			var d decisionapi.LoadDetail
			e.ExplainEstimate(incoming, &d)
			if d.PodEstimate.Source != tc.source || d.PodEstimate.Reason != tc.reason {
				t.Errorf("record says %+v, want source %q reason %q", d.PodEstimate, tc.source, tc.reason)
			}
			if tc.source == decisionapi.EstimateFromProfile && (d.PodEstimate.Samples != 3 || d.PodEstimate.Workload != "a/web@h1" || d.PodEstimate.EstimateMilliCPU != tc.want) {
				t.Errorf("profile record %+v: want 3 samples of a/web@h1 at %dm", d.PodEstimate, tc.want)
			}
			// A bare pod keeps its spec rule whatever was learned.
			bare := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bare"}}
			if got := e.Tracker.estimate(bare).MilliCPU; got != 1000 {
				t.Errorf("bare pod counts %dm, want its spec rule 1000m", got)
			}
		})
	}
}

// A new engine (a restarted scheduler) publishes nothing until it has learned from a
// document: every pod gets the spec rule meanwhile. The pod index is bounded by the pods the
// informer holds: deleted pods leave it.
func TestProfilesRebuildAfterRestart(t *testing.T) {
	now := time.Now()
	e, err := NewEngine(t.Context(), "Test", defaulted("http://unused", nil), nil, cpuEstimate(1000), Options{Now: func() time.Time { return now }, NoLoop: true})
	if err != nil {
		t.Fatal(err)
	}
	incoming := replica("a", "web", "p9", "", time.Time{})
	if got := e.Tracker.estimate(incoming).MilliCPU; got != 1000 {
		t.Fatalf("before any document: %dm, want the spec rule", got)
	}
	for _, p := range learnThree(e, now) {
		defer e.Profiles.EventHandler().OnDelete(p)
	}
	if got := e.Tracker.estimate(incoming).MilliCPU; got != 100 {
		t.Errorf("after one document: %dm, want the profile's 100m", got)
	}
}

// The args' workloadProfiles reach the engine: minSiblings 2 makes two measured replicas a
// profile; enabled false keeps every pod on its spec rule, learns nothing, and the record
// says why.
func TestProfileArgsFromConfig(t *testing.T) {
	now := time.Now()
	two := map[types.UID]float64{"a-p1": 2, "a-p2": 2}
	caps := func(string) Capacity { return Capacity{MilliCPU: 10000, MemoryBytes: 10 << 30} }
	for _, tc := range []struct {
		name   string
		wp     configv1.WorkloadProfileArgs
		want   int64
		reason string
	}{
		{"minSiblings 2", configv1.WorkloadProfileArgs{MinSiblings: new(int32(2))}, 200, ""},
		{"off", configv1.WorkloadProfileArgs{Enabled: new(false), MinSiblings: new(int32(2))}, 1000, ReasonProfilesOff},
		// bound 30 s ago: too young at the default minute, learned at minAgeSeconds 10.
		{"young, default minAge", configv1.WorkloadProfileArgs{MinSiblings: new(int32(2))}, 1000, ReasonNotMeasured},
		{"young, minAgeSeconds 10", configv1.WorkloadProfileArgs{MinSiblings: new(int32(2)), MinAgeSeconds: new(int64(10))}, 600, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := defaulted("http://unused", func(a *CommonArgs) { a.WorkloadProfiles = &tc.wp })
			e, err := NewEngine(t.Context(), "Test", args, nil, cpuEstimate(1000), Options{Now: func() time.Time { return now }, NoLoop: true})
			if err != nil {
				t.Fatal(err)
			}
			bound := now.Add(-time.Hour)
			if strings.HasPrefix(tc.name, "young") {
				bound = now.Add(-30 * time.Second)
			}
			if e.Profiles != nil {
				h := e.Profiles.EventHandler()
				h.OnAdd(replica("a", "web", "p1", "n1", bound), false)
				h.OnAdd(replica("a", "web", "p2", "n1", bound), false)
			}
			// why through the watcher's hook: that is how documents reach the learner, and it
			// must not fail with profiles off.
			e.Watcher.onSnapshot(measured(now, "n1", two))
			e.Profiles.Learn(measured(now, "n1", two), caps, now)
			incoming := replica("a", "web", "p4", "", time.Time{})
			if got := e.Tracker.estimate(incoming).MilliCPU; got != tc.want {
				t.Errorf("new replica counts %dm, want %dm", got, tc.want)
			}
			var d decisionapi.LoadDetail
			e.ExplainEstimate(incoming, &d)
			if d.PodEstimate.Reason != tc.reason {
				t.Errorf("record reason %q, want %q", d.PodEstimate.Reason, tc.reason)
			}
		})
	}
}

// What the engine serves for `kubectl berth nodes` says how many placed pods a node's
// unreported load is and how many of them count at their workload's profile.
func TestUnreportedCountsProfiledPods(t *testing.T) {
	now := time.Now()
	e, err := NewEngine(t.Context(), "Test", defaulted("http://unused", nil), nil, cpuEstimate(1000), Options{Now: func() time.Time { return now }, NoLoop: true})
	if err != nil {
		t.Fatal(err)
	}
	learnThree(e, now)
	e.Reserve(replica("a", "web", "p9", "", time.Time{}), "n2")
	e.Reserve(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bare", UID: "bare"}}, "n2")
	got := e.Unreported()["n2"]
	if got.Pods != 2 || got.FromProfile != 1 || got.MilliCPU != 1100 {
		t.Fatalf("n2: %+v; want 2 pods, 1 from a profile, 100m + 1000m", got)
	}
}

// learnThree binds three replicas of a/web on n1 an hour ago, each measured at 1 % of a
// 10-CPU node (100m), and learns them: their workload's profile is then 100m.
func learnThree(e *Engine, now time.Time) []*v1.Pod {
	h := e.Profiles.EventHandler()
	cpu := map[types.UID]float64{}
	var pods []*v1.Pod
	for i := range 3 {
		p := replica("a", "web", fmt.Sprint("p", i), "n1", now.Add(-time.Hour))
		h.OnAdd(p, false)
		cpu[p.UID] = 1
		pods = append(pods, p)
	}
	e.Profiles.Learn(measured(now, "n1", cpu), func(string) Capacity { return Capacity{MilliCPU: 10000, MemoryBytes: 1 << 30} }, now)
	return pods
}

func TestInvalidProfileArgs(t *testing.T) {
	bad := workloadprofile.DefaultArgs()
	bad.Percentile = 0
	if _, err := NewEngine(t.Context(), "Test", defaulted("http://unused", nil), nil, cpuEstimate(1), Options{NoLoop: true, Profiles: &bad}); err == nil {
		t.Error("invalid profile args accepted")
	}
}

// BenchmarkProfileEstimate is what a cycle adds per pod (PreScore, SignPod) and the usage
// Filter per node: the pod's key and one lookup in the published map, here holding 10 000
// workloads. It must not allocate.
func BenchmarkProfileEstimate(b *testing.B) {
	now := time.Now()
	p := NewProfiles(workloadprofile.DefaultArgs())
	cpu := map[types.UID]float64{}
	h := p.EventHandler()
	for w := range 10000 {
		for r := range 3 {
			pod := replica("a", fmt.Sprint("rs-", w), fmt.Sprint("p-", w, "-", r), "n1", now.Add(-time.Hour))
			h.OnAdd(pod, false)
			cpu[pod.UID] = 0.01
		}
	}
	p.Learn(measured(now, "n1", cpu), func(string) Capacity { return Capacity{MilliCPU: 1 << 20, MemoryBytes: 1 << 40} }, now)
	incoming := replica("a", "rs-42", "new", "", time.Time{})
	if _, _, ok := p.EstimateMean(incoming); !ok {
		b.Fatal("no profile for the incoming pod")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.EstimateMean(incoming)
	}
}

// learnedEngine is an engine (spec rule 1000m) whose informer saw bound and which learned what
// node n1 reports of them (cpu, % of its 10 cores) at now.
func learnedEngine(t *testing.T, args CommonArgs, now time.Time, bound []*v1.Pod, cpu map[types.UID]float64) *Engine {
	t.Helper()
	e, err := NewEngine(t.Context(), "Test", args, nil, cpuEstimate(1000), Options{Now: func() time.Time { return now }, NoLoop: true})
	if err != nil {
		t.Fatal(err)
	}
	h := e.Profiles.EventHandler()
	for _, p := range bound {
		h.OnAdd(p, false)
	}
	e.Profiles.Learn(measured(now, "n1", cpu), func(string) Capacity { return Capacity{MilliCPU: 10000, MemoryBytes: 10 << 30} }, now)
	return e
}

// requesting is a bare pod of namespace ns requesting cpuMilli, bound to node at bound.
func requesting(ns, name, node string, cpuMilli int64, bound time.Time) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), CreationTimestamp: metav1.NewTime(bound)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI)}}}}},
	}
}

// Each case: which pods of namespace "a" (1000m requests) are bound where, what n1 reports
// of them, and what a new bare pod of "a" requesting 1000m then counts at (spec rule 1000m).
// Ten pods measured alternately at 1 % and 3 % of a 10-core node use 0.1 and 0.3 of their
// request: mean 0.2, SD 0.1, so the pod counts at (0.2 + 1 × 0.1) × 1000m.
func TestNamespaceEstimates(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	old := now.Add(-time.Hour)
	ten := func(ns, node string) ([]*v1.Pod, map[types.UID]float64) {
		var pods []*v1.Pod
		cpu := map[types.UID]float64{}
		for i := range 10 {
			p := requesting(ns, fmt.Sprint("p", i), node, 1000, old)
			pods = append(pods, p)
			cpu[p.UID] = float64(1 + 2*(i%2))
		}
		return pods, cpu
	}
	aPods, aCPU := ten("a", "n1")
	bPods, bCPU := ten("b", "n1")
	elsewhere, _ := ten("a", "n2")
	for _, tc := range []struct {
		name    string
		minPods int32
		bound   []*v1.Pod
		cpu     map[types.UID]float64
		want    int64
		source  string
	}{
		{"ten measured: the namespace's ratio", 10, aPods, aCPU, 300, decisionapi.EstimateFromNamespace},
		{"nine measured: spec", 10, aPods[:9], aCPU, 1000, decisionapi.EstimateFromSpec},
		{"off: spec", 0, aPods, aCPU, 1000, decisionapi.EstimateFromSpec},
		{"another namespace's pods: spec", 10, bPods, bCPU, 1000, decisionapi.EstimateFromSpec},
		{"reported by a node they are not bound to: spec", 10, elsewhere, aCPU, 1000, decisionapi.EstimateFromSpec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := defaulted("http://unused", func(a *CommonArgs) {
				a.WorkloadProfiles = &configv1.WorkloadProfileArgs{NamespaceMinPods: &tc.minPods}
			})
			e := learnedEngine(t, args, now, tc.bound, tc.cpu)
			incoming := requesting("a", "new", "", 1000, time.Time{})
			if got := e.Tracker.estimate(incoming).MilliCPU; got != tc.want {
				t.Errorf("new pod counts %dm, want %dm", got, tc.want)
			}
			if got, ok := e.LearnedMilliCPU(incoming); ok != (tc.want != 1000) || (ok && got != tc.want) {
				t.Errorf("LearnedMilliCPU = %d, %v; want %d", got, ok, tc.want)
			}
			var d decisionapi.LoadDetail
			e.ExplainEstimate(incoming, &d)
			if d.PodEstimate.Source != tc.source || d.PodEstimate.Reason != ReasonNoController {
				t.Errorf("record says %+v, want source %q, reason %q", d.PodEstimate, tc.source, ReasonNoController)
			}
			if n := d.PodEstimate.Namespace; tc.source == decisionapi.EstimateFromNamespace &&
				(n == nil || n.Pods != 10 || n.EstimateMilliCPU != 300 || n.RequestMilliCPU != 1000 || math.Abs(n.Mean-0.2) > 1e-9 || math.Abs(n.SD-0.1) > 1e-9) {
				t.Errorf("record's namespace %+v, want 10 pods, 0.2 ± 0.1, 300m of 1000m", n)
			}
			// A pod without a CPU request has no ratio to scale: its spec rule.
			if got := e.Tracker.estimate(requesting("a", "nocpu", "", 0, time.Time{})).MilliCPU; got != 1000 {
				t.Errorf("pod without a CPU request counts %dm, want its spec rule", got)
			}
		})
	}
}

// A node's unmeasured learned pods count together: Σ mean + √(Σ margin²), each margin being the
// pod's estimate over its mean, so one pod counts at its own estimate and n at less than n times
// it; once the node's report holds a pod, it leaves the pool and counts as measured; a pod
// estimated from its spec adds its whole estimate beside the pool.
//   - namespace: ten bare pods of "a" (1000m requests) measured alternately at 1 % and 3 % of a
//     10-core node use 0.2 ± 0.1 of their request: one new pod 300m, n of them ⌈200n + 100√n⌉;
//   - workload: ten replicas measured alternately at 2 % and 4 %: mean 300m, p90 400m, spread
//     1/3, so one new replica counts ⌈400 × 4/3⌉ = 534m (margin 234m), n of them ⌈300n + 234√n⌉.
func TestLearnedPool(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	ten := int32(10)
	for _, tc := range []struct {
		name string
		args func(*CommonArgs)
		// pod makes the i-th pod of the case (bound to node when node is set).
		pod        func(name, node string, bound time.Time) *v1.Pod
		use        func(i int) float64 // % of n1 for the i-th learned pod
		want       []int64             // unreported after 1, 2, 3 new pods
		namespace  bool
		firstShare float64 // % of n2 the first new pod's window holds (latest: 3 ×)
		measured   int64   // what that first pod then counts: latest − held
	}{
		{"namespace", func(a *CommonArgs) { a.WorkloadProfiles = &configv1.WorkloadProfileArgs{NamespaceMinPods: &ten} },
			func(name, node string, bound time.Time) *v1.Pod { return requesting("a", name, node, 1000, bound) },
			func(i int) float64 { return float64(1 + 2*(i%2)) }, []int64{300, 542, 774}, true, 2, 400},
		{"workload", nil,
			func(name, node string, bound time.Time) *v1.Pod { return replica("a", "web", name, node, bound) },
			func(i int) float64 { return float64(2 + 2*(i%2)) }, []int64{534, 931, 1306}, false, 1, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bound []*v1.Pod
			cpu := map[types.UID]float64{}
			for i := range 10 {
				p := tc.pod(fmt.Sprint("p", i), "n1", now.Add(-time.Hour))
				bound = append(bound, p)
				cpu[p.UID] = tc.use(i)
			}
			e := learnedEngine(t, defaulted("http://unused", tc.args), now, bound, cpu)
			var placed []*v1.Pod
			for i, want := range tc.want {
				p := tc.pod(fmt.Sprint("new", i), "", time.Time{})
				placed = append(placed, p)
				e.Tracker.Add(p, "n2", now)
				if got := e.Tracker.Unreported("n2", NodeView{}).MilliCPU; got != want {
					t.Errorf("%d pods placed: unreported %dm, want %dm", i+1, got, want)
				}
			}
			pool := tc.want[2]
			// A bare pod of another namespace (no ratio, no profile) adds its spec rule.
			e.Tracker.Add(requesting("b", "x", "", 1000, time.Time{}), "n2", now)
			if got := e.Tracker.Unreported("n2", NodeView{}).MilliCPU; got != pool+1000 {
				t.Errorf("with a spec pod: unreported %dm, want %dm", got, pool+1000)
			}
			// What `kubectl berth nodes` reads: the same sum, 4 pods of which 3 learned.
			wantNS, wantProf := 3, 0
			if !tc.namespace {
				wantNS, wantProf = 0, 3
			}
			if got := e.Tracker.unreportedCounted("n2", NodeView{}, Capacity{}, now); got.MilliCPU != pool+1000 || got.Pods != 4 || got.FromNamespace != wantNS || got.FromProfile != wantProf {
				t.Errorf("counted %+v, want %dm of 4 pods, %d from the namespace, %d from the profile", got, pool+1000, wantNS, wantProf)
			}
			snap := measured(now.Add(time.Second), "n2", map[types.UID]float64{placed[0].UID: tc.firstShare})
			v, _ := snap.node("n2", now.Add(time.Second), time.Minute)
			got := e.Tracker.UnreportedOn("n2", v, Capacity{MilliCPU: 10000, MemoryBytes: 10 << 30}).MilliCPU
			if want := tc.measured + tc.want[1] + 1000; got != want {
				t.Errorf("first pod measured: unreported %dm, want %dm (its latest − held, the pool of two, the spec pod)", got, want)
			}
		})
	}
}

// Pooling one pod changes nothing: its pool is its own estimate, whichever way it was learned.
func TestPoolOfOneIsTheEstimate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Sourced
	}{
		{"profile", learnedSourced(fromProfile, Estimate{MilliCPU: 534}, 300)},
		{"namespace", learnedSourced(fromNamespace, Estimate{MilliCPU: 300}, 200)},
		{"estimate under the mean (rounding)", learnedSourced(fromProfile, Estimate{MilliCPU: 299}, 299.5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q pool
			q.add(&placed{source: fromProfile, meanCPU: tc.s.meanCPU, excessCPU: tc.s.excessCPU})
			if got, want := q.milliCPU(), max(tc.s.MilliCPU, int64(math.Ceil(tc.s.meanCPU))); got != want {
				t.Errorf("pool of one: %dm, want %dm", got, want)
			}
		})
	}
}
