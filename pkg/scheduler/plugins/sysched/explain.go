package sysched

import (
	"github.com/berth-sched/berth/pkg/decisionapi"
)

// scoreDetail is the ExS of placing a pod with set p on node with its terms, for decision
// records (called from Score only when the cycle records). It reads the same node state as
// score under the same lock, so the terms add up to the score Score returned.
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
