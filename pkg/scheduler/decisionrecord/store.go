package decisionrecord

import (
	"container/list"
	"context"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

// store is a bounded LRU of attempts keyed by pod UID, with a name index and a bounded
// memory of evicted names (so the endpoint can say "evicted" instead of "never seen").
type store struct {
	mu       sync.Mutex
	capacity int
	topK     int
	ll       *list.List // of *attempt, front = most recently begun
	byUID    map[types.UID]*list.Element
	byName   map[string]types.UID
	evicted  map[string]time.Time
	evictLog []string // ring of evicted keys, same capacity as the LRU
	evictPos int
	now      func() time.Time
}

func newStore(capacity, topK int, now func() time.Time) *store {
	registerMetrics()
	return &store{
		capacity: capacity,
		topK:     topK,
		ll:       list.New(),
		byUID:    make(map[types.UID]*list.Element, capacity),
		byName:   make(map[string]types.UID, capacity),
		evicted:  make(map[string]time.Time),
		evictLog: make([]string, capacity),
		now:      now,
	}
}

func key(ns, name string) string { return ns + "/" + name }

// begin starts a new attempt for pod, replacing the pod's previous one.
func (s *store) begin(pod *v1.Pod, profile string, weights map[string]int) *attempt {
	a := &attempt{
		topK: s.topK,
		rec: decisionapi.Record{
			Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
			Profile: profile, Attempts: 1, Started: s.now(), Outcome: decisionapi.OutcomeInProgress,
			Weights: weights,
		},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(pod.Namespace, pod.Name)
	delete(s.evicted, k)
	if e, ok := s.byUID[pod.UID]; ok {
		a.rec.Attempts = e.Value.(*attempt).attempts() + 1
		e.Value = a
		s.ll.MoveToFront(e)
	} else {
		if old, ok := s.byName[k]; ok {
			// A new pod with a reused name: the old one's record is stale, drop it.
			if e, ok := s.byUID[old]; ok {
				s.ll.Remove(e)
				delete(s.byUID, old)
			}
		}
		s.byUID[pod.UID] = s.ll.PushFront(a)
		s.byName[k] = pod.UID
	}
	for s.ll.Len() > s.capacity {
		e := s.ll.Back()
		old := e.Value.(*attempt)
		s.ll.Remove(e)
		delete(s.byUID, types.UID(old.rec.UID))
		ok := key(old.rec.Namespace, old.rec.Name)
		delete(s.byName, ok)
		s.remember(ok)
		evictedRecords.Inc()
	}
	storedRecords.Set(float64(s.ll.Len()))
	return a
}

func (s *store) remember(k string) {
	if prev := s.evictLog[s.evictPos]; prev != "" {
		delete(s.evicted, prev)
	}
	s.evictLog[s.evictPos] = k
	s.evictPos = (s.evictPos + 1) % len(s.evictLog)
	s.evicted[k] = s.now()
}

// get returns the record of ns/name, or when it was evicted.
func (s *store) get(ns, name string) (decisionapi.Record, bool, time.Time) {
	s.mu.Lock()
	k := key(ns, name)
	uid, ok := s.byName[k]
	var a *attempt
	if ok {
		a = s.byUID[uid].Value.(*attempt)
	}
	ev := s.evicted[k]
	s.mu.Unlock()
	if a == nil {
		return decisionapi.Record{}, false, ev
	}
	return a.snapshot(), true, time.Time{}
}

// getUID returns the record of the pod with uid (the Scheduled event's summary).
func (s *store) getUID(uid types.UID) (decisionapi.Record, bool) {
	s.mu.Lock()
	e, ok := s.byUID[uid]
	s.mu.Unlock()
	if !ok {
		return decisionapi.Record{}, false
	}
	return e.Value.(*attempt).snapshot(), true
}

func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ll.Len()
}

type reasonKey struct{ plugin, reason string }

// otherReasons counts the refusals past maxReasons distinct pairs.
var otherReasons = reasonKey{"*", "other reasons"}

// maxReasons bounds the distinct (plugin, reason) pairs counted per attempt.
const maxReasons = 64

// attempt is one scheduling cycle of one pod, filled in by the wrapped framework while the
// cycle runs (Filter runs in parallel over nodes, hence the mutex).
type attempt struct {
	mu   sync.Mutex
	topK int
	// prev is the pod of the cycle before this one (the source of a batching hint).
	prev string
	rec  decisionapi.Record
	// feasible counts nodes that passed Filter; atomic so the common case (a node fits)
	// takes no lock. anyRefused says refused may be non-empty.
	feasible   atomic.Int64
	anyRefused atomic.Bool
	refused    refusals
	scored     []decisionapi.NodeRecord
	// chosenDetails are the explainers' details of a chosen node no score of this cycle
	// covers (explainChosen).
	chosenDetails map[string]any
	sealed        bool
}

// Clone implements fwk.StateData: cycle-state clones (preemption dry runs) share the attempt.
func (a *attempt) Clone() fwk.StateData { return a }

func (a *attempt) attempts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rec.Attempts
}

func verdictOf(st *fwk.Status) *decisionapi.Verdict {
	return &decisionapi.Verdict{Plugin: st.Plugin(), Code: st.Code().String(), Reasons: append([]string(nil), st.Reasons()...)}
}

func (a *attempt) filter(node string, st *fwk.Status) {
	if st.IsSuccess() {
		a.feasible.Add(1)
		if a.anyRefused.Load() {
			a.refused.passed(node)
		}
		return
	}
	a.anyRefused.Store(true)
	a.refused.add(node, verdictOf(st))
}

func (a *attempt) preFilter(st *fwk.Status) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rec.PreFilter = verdictOf(st)
	a.rec.Outcome = decisionapi.OutcomeUnschedulable
}

func (a *attempt) hint(node string) {
	a.mu.Lock()
	a.rec.NodeHint = node
	a.rec.HintFrom = a.prev
	a.mu.Unlock()
}

func (a *attempt) fail(st *fwk.Status) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rec.Outcome = decisionapi.OutcomeError
	a.rec.Error = st.Message()
}

// scores keeps the topK best nodes of a successful RunScorePlugins.
func (a *attempt) scores(scores []fwk.NodePluginScores) {
	// The topK best by total (then name), by insertion into a short sorted list: no sort or
	// index slice over every scored node.
	better := func(x, y int) bool {
		sx, sy := &scores[x], &scores[y]
		if sx.TotalScore != sy.TotalScore {
			return sx.TotalScore > sy.TotalScore
		}
		return sx.Name < sy.Name
	}
	idx := make([]int, 0, a.topK+1)
	for i := range scores {
		if len(idx) == a.topK && !better(i, idx[len(idx)-1]) {
			continue
		}
		j := sort.Search(len(idx), func(k int) bool { return better(i, idx[k]) })
		idx = append(idx, 0)
		copy(idx[j+1:], idx[j:])
		idx[j] = i
		if len(idx) > a.topK {
			idx = idx[:a.topK]
		}
	}
	weights := a.rec.Weights
	out := make([]decisionapi.NodeRecord, 0, len(idx))
	for _, i := range idx {
		ns := &scores[i]
		nr := decisionapi.NodeRecord{Node: ns.Name, Feasible: true, Total: ns.TotalScore, Scores: make([]decisionapi.PluginScore, 0, len(ns.Scores))}
		raw := make(map[string]int64, len(ns.RawScores))
		for _, r := range ns.RawScores {
			raw[r.Name] = r.Score
		}
		for _, w := range ns.Scores {
			ps := decisionapi.PluginScore{Plugin: w.Name, Raw: raw[w.Name], Weighted: w.Score, Weight: weights[w.Name]}
			if ps.Weight > 0 {
				ps.Normalized = w.Score / int64(ps.Weight)
			}
			nr.Scores = append(nr.Scores, ps)
		}
		out = append(out, nr)
	}
	a.mu.Lock()
	a.scored = out
	a.mu.Unlock()
}

// explain attaches, to the nodes the record keeps, what each explainer read to score them in
// this cycle (see Explainer), for the plugins that scored the node.
func (a *attempt) explain(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, ex []Explainer) {
	if len(ex) == 0 {
		return
	}
	a.mu.Lock()
	kept := make(map[string][]string, len(a.scored))
	for _, nr := range a.scored {
		for _, s := range nr.Scores {
			kept[nr.Node] = append(kept[nr.Node], s.Plugin)
		}
	}
	a.mu.Unlock()
	if len(kept) == 0 {
		return
	}
	details := make(map[string]map[string]any, len(kept))
	now := time.Now()
	for _, ni := range nodes {
		n := ni.Node()
		if n == nil {
			continue
		}
		scored, ok := kept[n.Name]
		if !ok {
			continue
		}
		for _, e := range ex {
			if !slices.Contains(scored, e.Name()) {
				continue
			}
			d := e.ExplainScore(ctx, state, pod, ni)
			if d == nil {
				continue
			}
			d = aged(d, now)
			if details[n.Name] == nil {
				details[n.Name] = make(map[string]any, len(ex))
			}
			details[n.Name][e.Name()] = d
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sealed {
		return
	}
	for i := range a.scored {
		if d := details[a.scored[i].Node]; d != nil {
			a.scored[i].Details = d
		}
	}
}

// explainChosen records what each explainer reads for the chosen node when the cycle scored
// no node the record keeps as that node (a batching hint reused an earlier pod's scores, or
// the only feasible node was not scored): without it such a placement has no prediction on
// record, and a bench or an operator cannot tell what the scheduler expected of it.
func (a *attempt) explainChosen(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string, lister fwk.SharedLister, ex []Explainer) {
	if len(ex) == 0 || lister == nil {
		return
	}
	a.mu.Lock()
	scored := slices.ContainsFunc(a.scored, func(n decisionapi.NodeRecord) bool { return n.Node == node })
	a.mu.Unlock()
	if scored {
		return
	}
	ni, err := lister.NodeInfos().Get(node)
	if err != nil || ni.Node() == nil {
		return
	}
	details := make(map[string]any, len(ex))
	now := time.Now()
	for _, e := range ex {
		if d := e.ExplainScore(ctx, state, pod, ni); d != nil {
			details[e.Name()] = aged(d, now)
		}
	}
	if len(details) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.sealed {
		a.chosenDetails = details
	}
}

// aged fills a load detail's age of its sample at now.
func aged(d any, now time.Time) any {
	if ld, ok := d.(decisionapi.LoadDetail); ok && !ld.SampledAt.IsZero() {
		ld.AgeSeconds = now.Sub(ld.SampledAt).Seconds()
		return ld
	}
	return d
}

// result is what SchedulePod returned: the selected node, or the failure.
func (a *attempt) result(node string, feasibleOnly bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case node != "":
		a.rec.Chosen = node
		a.rec.Outcome = decisionapi.OutcomeScheduled
		a.rec.ScoringSkipped = feasibleOnly
	case a.rec.Outcome == decisionapi.OutcomeError:
	case err != nil && a.rec.PreFilter == nil && a.feasible.Load() == 0 && a.refused.count() == 0:
		a.rec.Outcome = decisionapi.OutcomeError
		a.rec.Error = err.Error()
	default:
		a.rec.Outcome = decisionapi.OutcomeUnschedulable
	}
	a.sealLocked()
}

func (a *attempt) reserveFailed(st *fwk.Status) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rec.Outcome = decisionapi.OutcomeError
	a.rec.Error = "reserved " + a.rec.Chosen + " but a Reserve plugin failed: " + st.Message()
}

func (a *attempt) postFilter(msg string) {
	a.mu.Lock()
	a.rec.PostFilter = msg
	a.mu.Unlock()
}

func (a *attempt) seal() {
	a.mu.Lock()
	a.sealLocked()
	a.mu.Unlock()
}

// sealLocked trims the refused nodes to topK (kept by name order) so a finished attempt's
// memory is bounded by topK whatever the cluster size.
func (a *attempt) sealLocked() {
	if a.sealed {
		return
	}
	a.sealed = true
	a.rec.Refused = a.refused.count()
	if a.rec.Refused > a.topK {
		a.refused.keepFirst(a.topK)
	}
}

func (a *attempt) snapshot() decisionapi.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rec
	r.Feasible = int(a.feasible.Load())
	if !a.sealed {
		r.Refused = a.refused.count()
	}
	names, refused := a.refused.first(a.topK)
	r.Nodes = make([]decisionapi.NodeRecord, 0, len(a.scored)+len(names))
	chosenListed := false
	for _, n := range a.scored {
		n.Chosen = n.Node == r.Chosen
		chosenListed = chosenListed || n.Chosen
		n.Scores = append([]decisionapi.PluginScore(nil), n.Scores...)
		r.Nodes = append(r.Nodes, n)
	}
	if r.Chosen != "" && !chosenListed {
		// Only one feasible node (no scoring) or a hinted node: list it without scores.
		r.Nodes = append([]decisionapi.NodeRecord{{Node: r.Chosen, Feasible: true, Chosen: true, Details: a.chosenDetails}}, r.Nodes...)
	}
	// Chosen first, then by total.
	sort.SliceStable(r.Nodes, func(i, j int) bool { return r.Nodes[i].Chosen && !r.Nodes[j].Chosen })
	listedFeasible := len(r.Nodes)
	for _, n := range names {
		vp, ok := refused[n]
		if !ok {
			continue // passed on a second evaluation while this was read
		}
		v := *vp
		r.Nodes = append(r.Nodes, decisionapi.NodeRecord{Node: n, Filter: &v})
	}
	if r.Feasible > listedFeasible {
		r.OmittedFeasible = r.Feasible - listedFeasible
	}
	r.OmittedRefused = r.Refused - len(names)
	if rs := a.refused.reasonCounts(); len(rs) > 0 {
		r.RefusedBy = rs
	}
	return r
}
