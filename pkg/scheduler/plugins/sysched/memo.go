package sysched

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/scheduler/nodememo"
)

// scoreMemo is the plugin's nodememo: a node's ExS is reused while the node's pod sets (its
// nodeState's version) and the incoming pod's syscall set are the same. Each Score used to take
// the state's read lock and look the node up by name from every parallel worker; now PreScore
// takes the lock once per cycle.
type scoreMemo struct {
	nodememo.Memo[memoStamp]
	// set is the last prepared pod's syscall set and setID its number: the pods of a burst
	// share one set, so a stamp compares an integer, not the set.
	set    bitset
	setID  uint64
	cycles uint64
}

type memoStamp struct {
	ns      *nodeState
	version uint64
	set     uint64
}

// pruneEvery is how many cycles pass between drops of the empty node states the memo creates
// (nodes that hold no pod, or are gone from the cluster).
const pruneEvery = 1024

// prepareScores scores nodes for the cycle of cs with the pod's syscall set p.
func (pl *SySched) prepareScores(cs fwk.CycleState, nodes []fwk.NodeInfo, p bitset) {
	s, m := pl.st, &pl.memo
	// The write lock: a node without a state gets an empty one, so its stamp has a version to
	// watch (the first pod placed there bumps it). Writers wait for one pass over the nodes.
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.setID == 0 || !m.set.equal(p) {
		m.setID++
		m.set = p
	}
	m.cycles++
	if m.cycles%pruneEvery == 0 {
		s.dropEmptyNodesLocked()
		m.Sweep()
	}
	id := m.setID
	m.Prepare(cs, nodes,
		func(st *memoStamp) bool { return st.ns.version == st.version && st.set == id },
		func(ni fwk.NodeInfo, st *memoStamp) int64 {
			// An unchanged node state is still the node's (a state leaves the map only after a
			// change of version), so only the pod's set changed: no lookup by name.
			ns := st.ns
			if ns == nil || ns.version != st.version {
				name := ni.Node().Name
				if ns = s.nodes[name]; ns == nil {
					ns = &nodeState{}
					s.nodes[name] = ns
				}
			}
			*st = memoStamp{ns: ns, version: ns.version, set: id}
			return ns.exs(p)
		})
}

// dropEmptyNodesLocked forgets node states without pods; a memo stamp holding one sees its
// version move and looks the node up again.
func (s *state) dropEmptyNodesLocked() {
	for name, ns := range s.nodes {
		if ns.n == 0 {
			ns.version++
			delete(s.nodes, name)
		}
	}
}
