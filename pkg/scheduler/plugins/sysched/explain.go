package sysched

import (
	"context"

	"github.com/berth-sched/berth/pkg/decisionapi"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// ExplainScore is what a decision record shows for the node: the ExS and its terms for the
// pod's syscall set the cycle resolved. The node's pod sets are read when the recorder asks,
// right after scoring; if a pod came or went on the node in between, a note says so.
func (pl *SySched) ExplainScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) any {
	node := nodeInfo.Node()
	if node == nil {
		return nil
	}
	ps := pl.podSetFor(cs, pod)
	d := pl.st.scoreDetail(node.Name, ps.set)
	d.Notes = ps.notes()
	if st, ok := pl.memo.Stamp(cs, node); ok && pl.st.changedSince(node.Name, st) {
		d.Notes = append(d.Notes, "the node's pods changed between scoring and this record: the terms are of the record's time")
	}
	return d
}

// changedSince says whether the node's pod sets are no longer those the stamp scored (the state
// was replaced or its version moved).
func (s *state) changedSince(node string, st memoStamp) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ns := s.nodes[node]
	return ns != st.ns || ns == nil || ns.version != st.version
}

// scoreDetail is the ExS of placing a pod with set p on node with its terms, for decision
// records. It reads the node state as score does, under the same lock, so the terms add up to
// the ExS it returns.
func (s *state) scoreDetail(node string, p bitset) decisionapi.SySchedDetail {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ns := s.nodes[node]
	d := decisionapi.SySchedDetail{PodSet: p.count()}
	if ns == nil || ns.n == 0 {
		return d
	}
	andNot, or := countAndNotOr(ns.h, p)
	d.ExS = ns.exs(p)
	d.Pods, d.NodeSet, d.HMinusP, d.HUnionP, d.SumPodSet = ns.n, ns.h.count(), andNot, or, ns.sum
	return d
}
