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
	"unsafe"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Memo holds one plugin instance's scores. S is the plugin's stamp. The zero value is ready.
type Memo[S any] struct {
	mu      sync.Mutex
	entries map[*v1.Node]*entry[S]
	cycles  uint64
	cur     atomic.Pointer[cycle]
	bufs    [2][]slot
	// hits and misses count scores reused and computed (tests and benchmarks).
	hits, misses atomic.Int64
}

// cycle is what Score reads: the prepared state and its scores in a small open-addressed table
// keyed by the node object's address, so a Score probes one contiguous array instead of a map
// and an entry per node.
type cycle struct {
	state fwk.CycleState
	slots []slot
	mask  uint64
}

type slot struct {
	node  *v1.Node
	score int64
}

// home is the node's first slot: the object's address, Fibonacci-hashed (the heap does not move
// objects, and the slot holds the pointer, so the address stays the node's for the cycle).
func home(n *v1.Node, mask uint64) uint64 {
	return (uint64(uintptr(unsafe.Pointer(n))) * 0x9E3779B97F4A7C15 >> 32) & mask
}

func (c *cycle) put(n *v1.Node, score int64) {
	i := home(n, c.mask)
	for c.slots[i].node != nil && c.slots[i].node != n {
		i = (i + 1) & c.mask
	}
	c.slots[i] = slot{node: n, score: score}
}

func (c *cycle) get(n *v1.Node) (int64, bool) {
	// At most half the slots are used, so the probe ends at an empty one.
	for i := home(n, c.mask); ; i = (i + 1) & c.mask {
		switch c.slots[i].node {
		case n:
			return c.slots[i].score, true
		case nil:
			return 0, false
		}
	}
}

// table returns a cleared slot array for n nodes from one of two buffers used in turn: a
// cycle's Scores have all returned before the cycle after next is prepared.
func (m *Memo[S]) table(n int) ([]slot, uint64) {
	size := 16
	for size < 2*n {
		size *= 2
	}
	b := &m.bufs[m.cycles%2]
	if cap(*b) < size {
		*b = make([]slot, size)
	} else {
		*b = (*b)[:size]
		clear(*b)
	}
	return *b, uint64(size - 1)
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
	slots, mask := m.table(len(nodes))
	c := &cycle{state: state, slots: slots, mask: mask}
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
			c.put(node, en.score)
			hits++
			continue
		}
		en.score = compute(ni, &en.stamp)
		en.cycle = id
		c.put(node, en.score)
		misses++
	}
	m.hits.Add(hits)
	m.misses.Add(misses)
	m.cur.Store(c)
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

// Stamp is the stamp the node's score for state's cycle was computed or reused with (what a
// plugin explaining that score must read), or false when Prepare did not score it in that cycle.
func (m *Memo[S]) Stamp(state fwk.CycleState, node *v1.Node) (S, bool) {
	var zero S
	if c := m.cur.Load(); c == nil || c.state != state || node == nil {
		return zero, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	en := m.entries[node]
	if en == nil || en.cycle != m.cycles {
		return zero, false
	}
	return en.stamp, true
}

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
	return c.get(node)
}

// Counts returns how many scores Prepare reused and computed so far.
func (m *Memo[S]) Counts() (hits, misses int64) { return m.hits.Load(), m.misses.Load() }

// Len is the number of node objects remembered.
func (m *Memo[S]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
