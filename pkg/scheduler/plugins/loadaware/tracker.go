package loadaware

import (
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// UnreportedWindow is how long before a node's sample time a pod must have been placed for
// the sample to be trusted to include it, when the watcher gives no pod list (upstream
// load-watcher). Same 60 s as upstream's agent reporting interval, so scores match there.
const UnreportedWindow = 60 * time.Second

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
}

// Tracker remembers pods placed on nodes (assumed in Reserve, or seen bound by the informer)
// until the agent's report lists them or AssumedPodExpirySeconds pass. Without it, every pod
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
	now      func() time.Time
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
	est := t.estimate(pod)
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.byUID[pod.UID]; p != nil {
		if p.node == node {
			return
		}
		t.removeLocked(pod.UID)
	}
	p := &placed{uid: pod.UID, node: node, at: at, est: est}
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

// counts says whether p still has to be added to the node's measured load.
func (t *Tracker) counts(p *placed, v NodeView, now time.Time) bool {
	if now.Sub(p.at) > t.expiry {
		return false
	}
	if reported, known := v.Reported(string(p.uid)); known {
		return !reported
	}
	if v.Updated.IsZero() {
		return true
	}
	return p.at.After(v.Updated.Add(-UnreportedWindow))
}

// Unreported sums the estimates of pods on node that v's metrics do not include yet.
func (t *Tracker) Unreported(node string, v NodeView) Estimate {
	return t.unreportedAt(node, v, t.now())
}

func (t *Tracker) unreportedAt(node string, v NodeView, now time.Time) Estimate {
	t.mu.Lock()
	b := t.byNode[node]
	t.mu.Unlock()
	if b == nil {
		return Estimate{}
	}
	return t.sum(b, v, now)
}

// sum adds up the bucket's pods that v does not include yet; lock free.
func (t *Tracker) sum(b *bucket, v NodeView, now time.Time) Estimate {
	s, _ := t.sumPods(b.load(), v, now)
	return s
}

// sumPods adds up the pods that v does not include yet, and says until when that sum holds by
// the clock alone (zero: for ever): a counted pod stops counting when it expires, and nothing
// else about a pod changes with time.
func (t *Tracker) sumPods(pods []placed, v NodeView, now time.Time) (Estimate, time.Time) {
	var sum Estimate
	var until time.Time
	for i := range pods {
		if t.counts(&pods[i], v, now) {
			sum.add(pods[i].est)
			if u := pods[i].at.Add(t.expiry); until.IsZero() || u.Before(until) {
				until = u
			}
		}
	}
	return sum, until
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

// Prune drops pods that no longer count against snap: reported, or too old. Called after
// every fetch, so stale entries never pile up (upstream #583 kept them forever).
func (t *Tracker) Prune(snap *Snapshot, expiry time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, p := range t.byUID {
		if now.Sub(p.at) > t.expiry {
			t.removeLocked(uid)
			continue
		}
		v := snap.Node(p.node, now, expiry)
		if v.Freshness != Fresh {
			// Unknown node: keep the pod, the next report may be fresh and not include it.
			continue
		}
		if !t.counts(p, v, now) {
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
	if t.now().Sub(at) > t.expiry {
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
