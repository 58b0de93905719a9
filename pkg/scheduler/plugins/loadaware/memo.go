package loadaware

import (
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// ScoreFunc is a plugin's score of one node. It may read only st, the NodeInfo's node object and
// allocatable, and what the plugin passed as the pod's key to PrepareScores: the memo reuses a
// result for as long as those stay the same.
type ScoreFunc func(st NodeState, nodeInfo fwk.NodeInfo) int64

// scoreMemo keeps a plugin's node scores from one scheduling cycle to the next. In a burst only
// the node that took the last pod changes between cycles, yet every cycle scores hundreds of
// nodes, and each fresh score costs a snapshot lookup and a placed-pod sum that mostly miss the
// CPU caches (the full Berth profile ran at 0.8x of the default plugins on that). A memoized
// score is reused while everything it was computed from is unchanged:
//   - the node object (the map key: the scheduler's cache replaces it on every node update);
//   - the load snapshot (a new one empties the memo's validity);
//   - the node's placed pods (the tracker replaces a bucket's slice on every change, so the
//     slice pointer says whether the sum is still the same);
//   - the clock, up to when the node's metrics expire or one of its placed pods stops counting;
//   - the pod's key (what of the pod the score depends on).
//
// PrepareScores (PreScore, one goroutine) writes; Score reads without a lock from the
// framework's parallel workers. The framework runs a profile's PreScore and Score of one cycle
// one after the other and one cycle at a time, and a cycle's Score only trusts entries marked
// with the cycle PreScore prepared for that very CycleState, so a Score of any other cycle (or
// one without PreScore) computes afresh.
type scoreMemo struct {
	mu      sync.Mutex
	snap    *Snapshot
	entries map[*v1.Node]*memoEntry
	cycles  uint64
	cur     atomic.Pointer[memoCycle]
	// hits and misses count entries reused and computed (tests and benchmarks).
	hits, misses atomic.Int64
}

type memoCycle struct {
	state fwk.CycleState
	id    uint64
}

type memoEntry struct {
	cycle uint64
	score int64
	pod   [2]int64
	snap  *Snapshot
	// bucket and pods are the node's placed pods the score summed; bucket nil means the score
	// could not be tied to the tracker and is computed every cycle.
	bucket *bucket
	pods   *[]placed
	// until is when the score may change by the clock alone (zero: never).
	until time.Time
}

func (m *memoEntry) valid(snap *Snapshot, pod [2]int64, now time.Time) bool {
	return m.bucket != nil && m.snap == snap && m.pod == pod && m.bucket.pods.Load() == m.pods &&
		(m.until.IsZero() || !now.After(m.until))
}

// PrepareScores is the PreScore half of the memo: it makes sure every node of nodes has a score
// for this cycle (reusing those whose inputs did not change, computing the others with score)
// so Score only looks it up. pod is the pod's part of the score's inputs.
func (e *Engine) PrepareScores(state fwk.CycleState, nodes []fwk.NodeInfo, pod [2]int64, score ScoreFunc) {
	m := &e.memo
	m.mu.Lock()
	defer m.mu.Unlock()
	snap := e.Watcher.Snapshot()
	now := e.now()
	if m.entries == nil {
		m.entries = make(map[*v1.Node]*memoEntry, len(nodes))
	}
	if snap != m.snap {
		// Entries of nodes not scored since the previous snapshot are for node objects the cache
		// has replaced (or nodes gone): drop them so the memo stays the size of the cluster.
		for n, en := range m.entries {
			if en.cycle != m.cycles {
				delete(m.entries, n)
			}
		}
		m.snap = snap
	}
	m.cycles++
	id := m.cycles
	var hits, misses int64
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		en := m.entries[node]
		if en == nil {
			en = &memoEntry{}
			m.entries[node] = en
		} else if en.valid(snap, pod, now) {
			en.cycle = id
			hits++
			continue
		}
		st, b, pods, until := e.nodeAt(snap, node.Name, now)
		*en = memoEntry{cycle: id, score: score(st, ni), pod: pod, snap: snap, bucket: b, pods: pods, until: until}
		misses++
	}
	m.hits.Add(hits)
	m.misses.Add(misses)
	m.cur.Store(&memoCycle{state: state, id: id})
}

// ForgetScores makes Score compute every node afresh until the next PrepareScores (a cycle
// that records its decision wants the details, not only the numbers).
func (e *Engine) ForgetScores() { e.memo.cur.Store(nil) }

// PreparedScore is the Score half of the memo: the node's score PrepareScores left for this
// cycle, or false.
func (e *Engine) PreparedScore(state fwk.CycleState, nodeInfo fwk.NodeInfo) (int64, bool) {
	c := e.memo.cur.Load()
	if c == nil || c.state != state {
		return 0, false
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, false
	}
	en := e.memo.entries[node]
	if en == nil || en.cycle != c.id {
		return 0, false
	}
	return en.score, true
}

// MemoCounts returns how many node scores PrepareScores reused and computed so far.
func (e *Engine) MemoCounts() (hits, misses int64) {
	return e.memo.hits.Load(), e.memo.misses.Load()
}

// nodeAt is Node against a given snapshot and time, also returning what the memo validates
// against: the node's tracker bucket and the slice summed (nil bucket: not tracked through
// this snapshot), and when the result may change by the clock alone (zero: never).
func (e *Engine) nodeAt(snap *Snapshot, name string, now time.Time) (NodeState, *bucket, *[]placed, time.Time) {
	v, en := snap.node(name, now, e.expiry)
	var until time.Time
	if v.Freshness == Fresh {
		until = v.Updated.Add(e.expiry)
	}
	if en == nil || en.bucket == nil {
		return NodeState{NodeView: v, Unreported: e.Tracker.unreportedAt(name, v, now), entry: en}, nil, nil, until
	}
	p := en.bucket.pods.Load()
	var pods []placed
	if p != nil {
		pods = *p
	}
	sum, podsUntil := e.Tracker.sumPods(pods, v, now)
	if !podsUntil.IsZero() && (until.IsZero() || podsUntil.Before(until)) {
		until = podsUntil
	}
	return NodeState{NodeView: v, Unreported: sum, entry: en}, en.bucket, p, until
}
