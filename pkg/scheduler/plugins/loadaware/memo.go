package loadaware

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/scheduler/nodememo"
)

// ScoreFunc is a plugin's score of one node. It may read only st, the NodeInfo's node object and
// allocatable, and what the plugin passed as the pod's key to PrepareScores: the memo reuses a
// result for as long as those stay the same.
type ScoreFunc func(st NodeState, nodeInfo fwk.NodeInfo) int64

// scoreMemo is the engine's nodememo: without it each Score looked its node up in the snapshot
// and summed its placed pods (e2e/bench/README.md has the figures). A score is reused while,
// besides the node object (the memo's key):
//   - the load snapshot is the same;
//   - the node's placed pods are the same (the tracker replaces a bucket's slice on every
//     change, so the slice pointer says whether the sum still holds);
//   - the clock has not passed the node's metrics expiry or a placed pod's;
//   - the pod's key (what of the pod the score depends on) is the same.
type scoreMemo struct {
	mu   sync.Mutex
	snap *Snapshot
	nodememo.Memo[memoStamp]
}

// The fields every cycle checks come first, so they share the entry's first cache lines.
type memoStamp struct {
	pod  [2]int64
	snap *Snapshot
	// bucket and pods are the node's placed pods the score summed; bucket nil means the score
	// could not be tied to the tracker and is computed every cycle.
	bucket *bucket
	pods   *[]placed
	// until is when the score may change by the clock alone (zero: never).
	until time.Time
	// st is the node's load state the score was computed from: when only the pod's key
	// changed, the next score is computed from it without a lookup.
	st NodeState
}

// PrepareScores is PreScore's half of the memo: every node of nodes gets a score for this cycle
// (reused where its inputs did not change, computed with score where they did), so Score only
// looks it up with PreparedScore. pod is the pod's part of the score's inputs.
func (e *Engine) PrepareScores(state fwk.CycleState, nodes []fwk.NodeInfo, pod [2]int64, score ScoreFunc) {
	m := &e.memo
	m.mu.Lock()
	defer m.mu.Unlock()
	snap := e.Watcher.Snapshot()
	if snap != m.snap {
		m.Sweep()
		m.snap = snap
	}
	now := e.now()
	m.Prepare(state, nodes,
		func(s *memoStamp) bool { return s.pod == pod && s.loadHolds(snap, now) },
		func(ni fwk.NodeInfo, s *memoStamp) int64 {
			if !s.loadHolds(snap, now) {
				st, b, pods, until := e.nodeAt(snap, ni.Node(), now)
				*s = memoStamp{st: st, snap: snap, bucket: b, pods: pods, until: until}
			}
			s.pod = pod
			return score(s.st, ni)
		})
}

// loadHolds says whether the node's load state in the stamp is still current.
func (s *memoStamp) loadHolds(snap *Snapshot, now time.Time) bool {
	return s.bucket != nil && s.snap == snap && s.bucket.pods.Load() == s.pods && (s.until.IsZero() || !now.After(s.until))
}

// PreparedScore is Score's half of the memo: the node's score PrepareScores left for this
// cycle, or false.
func (e *Engine) PreparedScore(state fwk.CycleState, nodeInfo fwk.NodeInfo) (int64, bool) {
	return e.memo.Score(state, nodeInfo)
}

// PreparedState is the node's load state PrepareScores scored it from in state's cycle (for a
// decision record: exactly the inputs of that score), else the node's state now.
func (e *Engine) PreparedState(state fwk.CycleState, node *v1.Node) NodeState {
	if s, ok := e.memo.Stamp(state, node); ok {
		return s.st
	}
	return e.NodeOf(node)
}

// MemoCounts returns how many node scores PrepareScores reused and computed so far.
func (e *Engine) MemoCounts() (hits, misses int64) { return e.memo.Counts() }

// nodeAt is Node against a given snapshot and time, also returning what the memo validates
// against: the node's tracker bucket and the slice summed (nil bucket: not tracked through
// this snapshot), and when the result may change by the clock alone (zero: never).
func (e *Engine) nodeAt(snap *Snapshot, node *v1.Node, now time.Time) (NodeState, *bucket, *[]placed, time.Time) {
	name, c := node.Name, CapacityOf(node)
	v, en := snap.node(name, now, e.expiry)
	var until time.Time
	if v.Freshness == Fresh {
		until = v.Updated.Add(e.expiry)
	}
	if en == nil || en.bucket == nil {
		st := NodeState{NodeView: v, entry: en}
		st.Unreported, st.HeldAtEstimate = e.Tracker.unreportedAt(name, v, c, now)
		return st, nil, nil, until
	}
	p := en.bucket.pods.Load()
	var pods []placed
	if p != nil {
		pods = *p
	}
	sum, held, podsUntil := e.Tracker.sumPods(pods, v, c, now)
	if !podsUntil.IsZero() && (until.IsZero() || podsUntil.Before(until)) {
		until = podsUntil
	}
	return NodeState{NodeView: v, Unreported: sum, HeldAtEstimate: held, entry: en}, en.bucket, p, until
}
