package decisionrecord

import (
	"sort"
	"sync"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

// refusalShards spreads the refused nodes of one attempt over locks: the framework filters
// nodes from 16 goroutines, and with one lock a cycle that refuses many nodes (instance
// classes, taints, a full pool) spends more time waiting for it than recording.
const refusalShards = 16

// refusals are the nodes an attempt's Filter refused, each with its latest verdict, and how
// many nodes each (plugin, reason) refused: sharded by node name, merged when read.
type refusals struct {
	shards [refusalShards]refusalShard
}

type refusalShard struct {
	mu      sync.Mutex
	refused map[string]*decisionapi.Verdict
	reasons map[reasonKey]int
}

func (r *refusals) shard(node string) *refusalShard {
	// FNV-1a, inline: no allocation, no hasher object.
	h := uint32(2166136261)
	for i := 0; i < len(node); i++ {
		h ^= uint32(node[i])
		h *= 16777619
	}
	return &r.shards[h%refusalShards]
}

// add records v for node; a node's reasons count once, at its first refusal.
func (r *refusals) add(node string, v *decisionapi.Verdict) {
	s := r.shard(node)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		s.refused = make(map[string]*decisionapi.Verdict)
		s.reasons = make(map[reasonKey]int)
	}
	if _, seen := s.refused[node]; !seen {
		rs := v.Reasons
		if len(rs) == 0 {
			rs = []string{v.Code}
		}
		for _, reason := range rs {
			k := reasonKey{v.Plugin, reason}
			if _, ok := s.reasons[k]; !ok && len(s.reasons) >= maxReasons {
				// Reasons that name the node would grow without bound on big clusters.
				k = otherReasons
			}
			s.reasons[k]++
		}
	}
	s.refused[node] = v
}

// passed forgets node's refusal: it passed on a second evaluation (nominated pods first).
func (r *refusals) passed(node string) {
	s := r.shard(node)
	s.mu.Lock()
	delete(s.refused, node)
	s.mu.Unlock()
}

// count is how many nodes are refused now.
func (r *refusals) count() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n += len(s.refused)
		s.mu.Unlock()
	}
	return n
}

// first returns the refused nodes' names in order, at most limit, with their verdicts.
func (r *refusals) first(limit int) ([]string, map[string]*decisionapi.Verdict) {
	names := r.firstNames(limit)
	out := make(map[string]*decisionapi.Verdict, len(names))
	for _, n := range names {
		s := r.shard(n)
		s.mu.Lock()
		if v, ok := s.refused[n]; ok {
			out[n] = v
		}
		s.mu.Unlock()
	}
	return names, out
}

// firstNames is the first limit refused nodes by name.
func (r *refusals) firstNames(limit int) []string {
	var names []string
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for n := range s.refused {
			names = append(names, n)
		}
		s.mu.Unlock()
	}
	sort.Strings(names)
	if len(names) > limit {
		names = names[:limit]
	}
	return names
}

// keepFirst drops all but the first limit refused nodes by name, so a finished attempt's
// memory is bounded whatever the cluster size.
func (r *refusals) keepFirst(limit int) {
	names := r.firstNames(limit)
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for n := range s.refused {
			if !keep[n] {
				delete(s.refused, n)
			}
		}
		s.mu.Unlock()
	}
}

// reasonCounts merges the shards' counts. Past maxReasons distinct pairs, the least counted
// fold into "other reasons".
func (r *refusals) reasonCounts() []decisionapi.ReasonCount {
	merged := map[reasonKey]int{}
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for k, c := range s.reasons {
			merged[k] += c
		}
		s.mu.Unlock()
	}
	out := make([]decisionapi.ReasonCount, 0, len(merged))
	for k, c := range merged {
		out = append(out, decisionapi.ReasonCount{Plugin: k.plugin, Reason: k.reason, Nodes: c})
	}
	byCount := func(out []decisionapi.ReasonCount) {
		sort.Slice(out, func(i, j int) bool {
			x, y := out[i], out[j]
			if x.Nodes != y.Nodes {
				return x.Nodes > y.Nodes
			}
			if x.Plugin != y.Plugin {
				return x.Plugin < y.Plugin
			}
			return x.Reason < y.Reason
		})
	}
	byCount(out)
	if len(out) <= maxReasons {
		return out
	}
	other := decisionapi.ReasonCount{Plugin: otherReasons.plugin, Reason: otherReasons.reason}
	kept := out[:0:0]
	for _, rc := range out {
		if rc.Plugin == other.Plugin && rc.Reason == other.Reason {
			other.Nodes += rc.Nodes
			continue
		}
		if len(kept) < maxReasons-1 {
			kept = append(kept, rc)
			continue
		}
		other.Nodes += rc.Nodes
	}
	kept = append(kept, other)
	byCount(kept)
	return kept
}
