package loadaware

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Estimate is the load a placed pod is expected to add before the agent reports it.
type Estimate struct {
	MilliCPU    int64
	MemoryBytes int64
}

func (e *Estimate) add(o Estimate) {
	e.MilliCPU += o.MilliCPU
	e.MemoryBytes += o.MemoryBytes
}

// Estimator turns a pod into its expected load; each plugin has its own rule.
type Estimator func(*v1.Pod) Estimate

// placed is immutable once made: readers hold pointers to it without a lock.
type placed struct {
	uid  types.UID
	node string
	at   time.Time
	est  Estimate
	// estimateUntil: until then the pod counts at no less than est even once measured
	// (estimateSeconds; zero: not at all).
	estimateUntil time.Time
	// source is where est came from (profile: for `kubectl berth nodes`).
	source estimateSource
	// meanCPU and excessCPU (millicores) split a learned est.MilliCPU (source not fromSpec)
	// into the learned mean and the margin over it: while unmeasured the pod counts in its
	// node's pool (see pooled).
	meanCPU, excessCPU float64
}

// estimateSource is where a placed pod's estimate came from.
type estimateSource uint8

const (
	fromSpec estimateSource = iota
	fromProfile
	fromNamespace
)

// Sourced is a pod's estimate with where it came from and, for a learned one (profile or
// namespace), the mean and the margin over it (millicores) its CPU is made of.
type Sourced struct {
	Estimate
	source             estimateSource
	meanCPU, excessCPU float64
}

// learnedSourced is a Sourced from a learned mean: its CPU estimate is mean plus the margin, so
// est and the split agree (a pool of this one pod counts est, see pool).
func learnedSourced(source estimateSource, est Estimate, mean float64) Sourced {
	return Sourced{Estimate: est, source: source, meanCPU: mean, excessCPU: max(float64(est.MilliCPU)-mean, 0)}
}

// Tracker remembers pods placed on nodes (assumed in Reserve, or seen bound by the informer)
// until the scored window holds them whole (see remaining), or, for a pod the node's report
// never lists, until AssumedPodExpirySeconds pass. Without it, every pod
// of a burst sees the same snapshot and picks the same coolest node (upstream issue #797).
//
// Score reads it for every scored node of every cycle from the framework's parallel workers,
// so reads take no lock: each node's pods live in a bucket holding an immutable slice that the
// writers (Reserve, Unreserve, pod events, Prune) replace under mu. Install attaches each
// node's bucket to that node's snapshot entry, so Score finds the node's load and its placed
// pods with one map lookup (Engine.Node).
type Tracker struct {
	mu       sync.Mutex
	byUID    map[types.UID]*placed
	byNode   map[string]*bucket
	expiry   time.Duration
	estimate Estimator
	// estimateFor is how long after placement a pod counts at no less than its estimate
	// (estimateSeconds, or the pod's own annotation within podEstimateSecondsLimit), and whether
	// the pod's annotation was ignored as malformed; nil: 0.
	estimateFor func(*v1.Pod) (time.Duration, bool)
	// ignored counts a newly tracked pod whose annotation was ignored (nil: not counted).
	ignored func()
	// sourced, when set, is estimate that also says where the estimate came from (one profile
	// lookup per tracked pod, not two).
	sourced func(*v1.Pod) Sourced
	now     func() time.Time
	// installed is the snapshot Install published last. Its entries point at their nodes'
	// buckets, so those buckets are kept even when empty: a fresh bucket for the same node
	// would be invisible to that snapshot's readers.
	installed *Snapshot
}

// bucket is one node's placed pods; pods is replaced, never changed in place. The pods are held
// by value, so summing a node's pods reads one array, not one allocation per pod.
type bucket struct {
	pods atomic.Pointer[[]placed]
}

func (b *bucket) load() []placed {
	if p := b.pods.Load(); p != nil {
		return *p
	}
	return nil
}

// NewTracker builds an empty tracker.
func NewTracker(expiry time.Duration, est Estimator, now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{
		byUID:    map[types.UID]*placed{},
		byNode:   map[string]*bucket{},
		expiry:   expiry,
		estimate: est,
		now:      now,
	}
}

// Add records pod on node at time at. An already tracked pod keeps its earliest time (the
// Reserve time beats the later bind event) unless it moved node.
func (t *Tracker) Add(pod *v1.Pod, node string, at time.Time) {
	if pod == nil || node == "" {
		return
	}
	var src Sourced
	if t.sourced != nil {
		src = t.sourced(pod)
	} else {
		src.Estimate = t.estimate(pod)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.byUID[pod.UID]; p != nil {
		if p.node == node {
			return
		}
		t.removeLocked(pod.UID)
	}
	p := &placed{uid: pod.UID, node: node, at: at, est: src.Estimate, source: src.source,
		meanCPU: src.meanCPU, excessCPU: src.excessCPU}
	d, malformed := t.estimateWindow(pod)
	if d > 0 {
		p.estimateUntil = at.Add(d)
	}
	// why here: once per pod tracked, not per event that re-adds it.
	if malformed && t.ignored != nil {
		t.ignored()
	}
	t.byUID[pod.UID] = p
	b := t.byNode[node]
	if b == nil {
		b = &bucket{}
		t.byNode[node] = b
	}
	old := b.load()
	pods := make([]placed, len(old), len(old)+1)
	copy(pods, old)
	pods = append(pods, *p)
	b.pods.Store(&pods)
}

// Remove forgets a pod (Unreserve, deletion, termination).
func (t *Tracker) Remove(uid types.UID) {
	t.mu.Lock()
	t.removeLocked(uid)
	t.mu.Unlock()
}

func (t *Tracker) removeLocked(uid types.UID) {
	p := t.byUID[uid]
	if p == nil {
		return
	}
	delete(t.byUID, uid)
	b := t.byNode[p.node]
	if b == nil {
		return
	}
	old := b.load()
	pods := make([]placed, 0, len(old))
	for _, q := range old {
		if q.uid != uid {
			pods = append(pods, q)
		}
	}
	b.pods.Store(&pods)
	// Drop empty node keys, unlike upstream (#636), so the map does not grow forever; nodes of
	// the installed snapshot keep theirs (see installed).
	if len(pods) == 0 && !t.installed.has(p.node) {
		delete(t.byNode, p.node)
	}
}

// Capacity is a node's capacity in the units of an Estimate: it turns a pod's share of the
// node (percent) into what the share holds of the pod's estimate. A zero field means unknown,
// and that resource falls back to the time rule.
type Capacity struct {
	MilliCPU    int64
	MemoryBytes int64
}

// CapacityOf is node.Status.Capacity's CPU and memory: the watcher's percentages are of capacity.
func CapacityOf(node *v1.Node) Capacity {
	if node == nil {
		return Capacity{}
	}
	// Indexed, not Capacity.Cpu(): that allocates a copy.
	cpu := node.Status.Capacity[v1.ResourceCPU]
	mem := node.Status.Capacity[v1.ResourceMemory]
	return Capacity{MilliCPU: cpu.MilliValue(), MemoryBytes: mem.Value()}
}

// window is v's window length, DefaultWindow when unset.
func window(v NodeView) time.Duration {
	if v.Window > 0 {
		return v.Window
	}
	return DefaultWindow
}

// inSample says whether v's sample may hold any of p yet, and how long the window ending at
// the sample has been able to see it (covered ≤ 0: not at all).
func inSample(p *placed, v NodeView) (in bool, covered time.Duration) {
	if v.Updated.IsZero() {
		return false, 0
	}
	covered = v.Updated.Sub(p.at)
	if reported, known := v.Reported(string(p.uid)); known {
		return reported, max(covered, 0)
	}
	// No pod list (upstream watcher): only time tells.
	return covered > 0, covered
}

// remaining is what of p's expected use v's scored window does not hold yet, until when that
// holds by the clock alone (zero: until v changes), and whether p's estimate window holds it
// at its estimate. A pod v's sample does not hold at all counts
// its whole estimate until the tracker's expiry (it may never start). Once in the sample:
//   - with per-pod usage, max(use − its share of the window, 0), where use is what the agent
//     measured it using now: once measured, a pod's use is known better than any estimate
//     from its spec (requests overstate most pods' use several times, and packing on them
//     would only pack requests);
//   - without, estimate × (1 − covered/window), covered being the time from placement to the
//     sample;
//   - and nothing once the window has seen it for its whole length: the window average then
//     holds all of the pod, and counting any more would count it twice;
//   - except in its estimate window (estimateSeconds), where a measured pod counts
//     max(max(use, estimate) − its share of the window, 0), however long the window has held it.
func (t *Tracker) remaining(p *placed, v NodeView, c Capacity, now time.Time) (Estimate, time.Time, bool) {
	in, covered := inSample(p, v)
	if !in {
		if now.Sub(p.at) > t.expiry {
			return Estimate{}, time.Time{}, false
		}
		return p.est, p.at.Add(t.expiry), false
	}
	w := window(v)
	share, measured := v.Share(string(p.uid))
	// In its estimate window a measured pod counts at least its estimate, however long the
	// scored window has held it: what the agent measures of a slow starter is not yet its use.
	// why not Before: the memo (memo.go) holds a value up to and including its until.
	forced := measured && !now.After(p.estimateUntil)
	if covered >= w && !forced {
		return Estimate{}, time.Time{}, false
	}
	fade := max(1-float64(covered)/float64(w), 0)
	rem := func(est, capacity int64, usePct, heldPct float64) int64 {
		if measured && capacity > 0 {
			if forced {
				usePct = max(usePct, float64(est)/float64(capacity)*100)
			}
			return max(int64(math.Round((usePct-heldPct)/100*float64(capacity))), 0)
		}
		return int64(math.Round(float64(est) * fade))
	}
	var until time.Time
	if forced {
		until = p.estimateUntil
	}
	return Estimate{
		MilliCPU:    rem(p.est.MilliCPU, c.MilliCPU, share.LatestCPU, share.CPU),
		MemoryBytes: rem(p.est.MemoryBytes, c.MemoryBytes, share.LatestMemory, share.Memory),
	}, until, forced
}

// estimateWindow is how long after placement pod counts at no less than its estimate, and
// whether its annotation was ignored as malformed.
func (t *Tracker) estimateWindow(pod *v1.Pod) (time.Duration, bool) {
	if t.estimateFor == nil {
		return 0, false
	}
	return t.estimateFor(pod)
}

// done says whether p no longer counts against v whatever the node's capacity: the window
// has held it for its whole length and its estimate window is over, or it expired before the
// node reported it.
func (t *Tracker) done(p *placed, v NodeView, now time.Time) bool {
	in, covered := inSample(p, v)
	if !in {
		return now.Sub(p.at) > t.expiry
	}
	return covered >= window(v) && now.After(p.estimateUntil)
}

// Unreported sums what of the estimates of pods on node v's window does not hold yet, by the
// time rule (no capacity to convert per-pod shares with; see UnreportedOn).
func (t *Tracker) Unreported(node string, v NodeView) Estimate {
	s, _ := t.unreportedAt(node, v, Capacity{}, t.now())
	return s
}

// UnreportedOn is Unreported with the node's capacity, so per-pod shares count.
func (t *Tracker) UnreportedOn(node string, v NodeView, c Capacity) Estimate {
	s, _ := t.unreportedAt(node, v, c, t.now())
	return s
}

// unreportedAt is the remaining estimate of node's placed pods, and the part of it pods in their
// estimate window (estimateSeconds) make.
func (t *Tracker) unreportedAt(node string, v NodeView, c Capacity, now time.Time) (sum, held Estimate) {
	t.mu.Lock()
	b := t.byNode[node]
	t.mu.Unlock()
	if b == nil {
		return Estimate{}, Estimate{}
	}
	return t.sum(b, v, c, now)
}

// sum adds up the bucket's remaining estimates (and their held part, see unreportedAt); lock free.
func (t *Tracker) sum(b *bucket, v NodeView, c Capacity, now time.Time) (sum, held Estimate) {
	sum, held, _ = t.sumPods(b.load(), v, c, now)
	return sum, held
}

// pooled says p counts in its node's pool: its CPU estimate is learned (its workload's profile
// or its namespace's ratio: a mean and a margin over it) and the node's sample does not hold it
// yet (nor has it expired). Why a pool: each such pod alone counts at mean + margin, a bound on
// one pod; n of them together overshoot their summed means far less often than each
// overshoots alone, so the node adds Σ mean + √(Σ margin²) (for margins of m standard
// deviations: Σ mean + m·√(Σ SD²), the bound at m deviations of their sum). One pod counts at
// its own estimate; three replicas of one workload at 3·mean + √3·margin, not 3·(mean +
// margin). Summing each pod's bound would count a wave of unmeasured replicas at several times
// their use and fill every node by estimate long before by load.
func (t *Tracker) pooled(p *placed, v NodeView, now time.Time) bool {
	if p.source == fromSpec {
		return false
	}
	in, _ := inSample(p, v)
	return !in && now.Sub(p.at) <= t.expiry
}

// pool is the CPU a node's pooled pods add together (see pooled).
type pool struct{ mean, excessSq float64 }

func (q *pool) add(p *placed) {
	q.mean += p.meanCPU
	q.excessSq += p.excessCPU * p.excessCPU
}

func (q pool) milliCPU() int64 {
	if q.mean == 0 && q.excessSq == 0 {
		return 0
	}
	return int64(math.Ceil(q.mean + math.Sqrt(q.excessSq)))
}

// sumPods adds up the pods' remaining estimates and what of them pods in their estimate window
// make, and says until when that holds by the clock alone (zero: for ever): a pod not in the
// sample changes when it expires, a measured one when its estimate window ends.
func (t *Tracker) sumPods(pods []placed, v NodeView, c Capacity, now time.Time) (sum, held Estimate, until time.Time) {
	return t.sumPodsEach(pods, v, c, now, nil)
}

// sumPodsEach is sumPods, also calling counted (when set) with each pod that still adds something.
func (t *Tracker) sumPodsEach(pods []placed, v NodeView, c Capacity, now time.Time, counted func(*placed)) (sum, held Estimate, until time.Time) {
	var q pool
	for i := range pods {
		r, u, h := t.remaining(&pods[i], v, c, now)
		if counted != nil && r != (Estimate{}) {
			counted(&pods[i])
		}
		if t.pooled(&pods[i], v, now) {
			q.add(&pods[i])
			r.MilliCPU = 0
		}
		sum.add(r)
		if h {
			held.add(r)
		}
		if !u.IsZero() && (until.IsZero() || u.Before(until)) {
			until = u
		}
	}
	sum.MilliCPU += q.milliCPU()
	return sum, held, until
}

// unreportedCounted is what node's placed pods still add (as sum adds it up), how many pods
// that is, and how many of those count at their workload's profile: one pass. Read for
// `kubectl berth nodes`, never in a cycle.
func (t *Tracker) unreportedCounted(node string, v NodeView, c Capacity, now time.Time) (u NodeUnreported) {
	t.mu.Lock()
	b := t.byNode[node]
	t.mu.Unlock()
	if b == nil {
		return u
	}
	u.Estimate, _, _ = t.sumPodsEach(b.load(), v, c, now, func(p *placed) {
		u.Pods++
		switch p.source {
		case fromProfile:
			u.FromProfile++
		case fromNamespace:
			u.FromNamespace++
		}
	})
	return u
}

// Install publishes snap (publish stores it where readers find it) after pointing each of its
// node entries at the node's bucket, created empty where missing; it then drops the empty
// buckets of nodes the new document no longer has. Readers of snap need no tracker lookup.
// A snapshot is installed by one tracker only (each engine fetches its own).
func (t *Tracker) Install(snap *Snapshot, publish func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if snap != nil {
		for name, e := range snap.nodes {
			b := t.byNode[name]
			if b == nil {
				b = &bucket{}
				t.byNode[name] = b
			}
			e.bucket = b
		}
	}
	publish()
	t.installed = snap
	for name, b := range t.byNode {
		if len(b.load()) == 0 && !snap.has(name) {
			delete(t.byNode, name)
		}
	}
}

// Prune drops pods that no longer count against snap: held whole by the window, or never
// reported within the expiry. Called after
// every fetch, so stale entries never pile up (upstream #583 kept them forever).
func (t *Tracker) Prune(snap *Snapshot, expiry time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, p := range t.byUID {
		v := snap.Node(p.node, now, expiry)
		if v.Freshness != Fresh {
			// Unknown node: keep the pod, the next report may be fresh and not hold it yet;
			// but not for ever (a node that never reports again).
			if now.Sub(p.at) > t.expiry+window(v) {
				t.removeLocked(uid)
			}
			continue
		}
		if t.done(p, v, now) {
			t.removeLocked(uid)
		}
	}
}

// Len is the number of tracked pods (tests, debugging).
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byUID)
}

// bindTime is when pod was bound as far as the API says, so pods that were running long
// before the scheduler started are not counted again at startup (upstream stamps them "now").
func bindTime(pod *v1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return pod.CreationTimestamp.Time
}

func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

func (t *Tracker) observe(pod *v1.Pod) {
	if pod.Spec.NodeName == "" {
		return
	}
	if terminal(pod) || pod.DeletionTimestamp != nil {
		t.Remove(pod.UID)
		return
	}
	at := bindTime(pod)
	d, _ := t.estimateWindow(pod)
	if t.now().Sub(at) > max(t.expiry, d) {
		return
	}
	t.Add(pod, pod.Spec.NodeName, at)
}

// EventHandler keeps the tracker in step with the pod informer: pods bound by anyone (other
// profiles, other schedulers) count too, deleted or finished pods stop counting.
func (t *Tracker) EventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pod, ok := obj.(*v1.Pod); ok {
				t.observe(pod)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			oldPod, ok1 := oldObj.(*v1.Pod)
			newPod, ok2 := newObj.(*v1.Pod)
			if !ok1 || !ok2 {
				return
			}
			// Only a bind or a move or an end matters; status churn of running pods must
			// not re-add pods Prune already dropped.
			if oldPod.Spec.NodeName != newPod.Spec.NodeName || terminal(newPod) || newPod.DeletionTimestamp != nil {
				t.observe(newPod)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				t.Remove(pod.UID)
			}
		},
	}
}

// Nodes lists the nodes with tracked placed pods.
func (t *Tracker) Nodes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.byNode))
	for n, b := range t.byNode {
		if len(b.load()) > 0 {
			out = append(out, n)
		}
	}
	return out
}
