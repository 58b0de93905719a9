// Package nodememo keeps a Score plugin's node scores from one scheduling cycle to the next.
//
// In a burst of similar pods only the node that took the last pod changes between cycles, yet
// every cycle scores hundreds of nodes, and a score read from a plugin's own per-node state
// costs lookups that mostly miss the CPU caches. A plugin's PreScore calls Prepare with the
// cycle's nodes: a node whose stamp (what its score was computed from) is still valid keeps its
// score, the others are computed; Score then only looks the result up.
//
// Prepare runs in PreScore (one goroutine; it takes the memo's lock); Score reads without a lock
// from the framework's parallel workers. That is sound because the framework runs a profile's
// PreScore and Score of one cycle one after the other and one cycle at a time, and a Score only
// trusts entries Prepare marked for that very CycleState: a Score of any other cycle (or of one
// whose PreScore did not prepare) gets false and computes afresh.
package nodememo

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Memo holds one plugin instance's scores. S is the plugin's stamp. The zero value is ready.
type Memo[S any] struct {
	mu      sync.Mutex
	entries map[*v1.Node]*entry[S]
	cycles  uint64
	cur     atomic.Pointer[cycle]
	// hits and misses count scores reused and computed (tests and benchmarks).
	hits, misses atomic.Int64
}

type cycle struct {
	state fwk.CycleState
	id    uint64
}

type entry[S any] struct {
	cycle uint64
	score int64
	stamp S
}

// Prepare gives every node of nodes a score for state's cycle. The key is the node object: the
// scheduler's cache replaces it whenever the node changes, so anything read from the object
// never needs a stamp. valid says whether a stamp still holds; compute scores a node and updates
// its stamp, which holds what the node's previous computation left (zero for a node new to the
// memo), so the parts of it that still hold can be reused. A plugin whose state has writers holds its own lock around Prepare, so
// nothing changes between a stamp's check and its use.
func (m *Memo[S]) Prepare(state fwk.CycleState, nodes []fwk.NodeInfo, valid func(*S) bool, compute func(fwk.NodeInfo, *S) int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = make(map[*v1.Node]*entry[S], len(nodes))
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
			en = &entry[S]{}
			m.entries[node] = en
		} else if valid(&en.stamp) {
			en.cycle = id
			hits++
			continue
		}
		en.score = compute(ni, &en.stamp)
		en.cycle = id
		misses++
	}
	m.hits.Add(hits)
	m.misses.Add(misses)
	m.cur.Store(&cycle{state: state, id: id})
}

// Sweep drops the entries the last Prepare did not see: node objects the cache has replaced,
// nodes gone. Plugins call it when their own state turns over (a new load snapshot), so the
// memo stays the size of the cluster.
func (m *Memo[S]) Sweep() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, en := range m.entries {
		if en.cycle != m.cycles {
			delete(m.entries, n)
		}
	}
}

// Forget makes Score compute every node afresh until the next Prepare (a cycle that records
// its decision wants the details, not only the numbers).
func (m *Memo[S]) Forget() { m.cur.Store(nil) }

// Score is the node's score Prepare left for state's cycle, or false.
func (m *Memo[S]) Score(state fwk.CycleState, nodeInfo fwk.NodeInfo) (int64, bool) {
	c := m.cur.Load()
	if c == nil || c.state != state {
		return 0, false
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, false
	}
	en := m.entries[node]
	if en == nil || en.cycle != c.id {
		return 0, false
	}
	return en.score, true
}

// Counts returns how many scores Prepare reused and computed so far.
func (m *Memo[S]) Counts() (hits, misses int64) { return m.hits.Load(), m.misses.Load() }

// Len is the number of node objects remembered.
func (m *Memo[S]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
