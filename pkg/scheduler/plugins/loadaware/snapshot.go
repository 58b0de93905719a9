package loadaware

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// ResourceData is one resource's utilisation in percent, read the way upstream's
// GetResourceData does: AVG wins, STD is the deviation, Latest/"" stand in for AVG only
// while no AVG has been seen. Valid is set as soon as any metric of the type exists.
type ResourceData struct {
	Avg, Std float64
	Valid    bool
}

// NodeMetrics is the per-node digest every load-aware plugin reads, in Berth's typed form
// (loadapi.ResourceLoad): computed once per fetch so Score never walks a metric list.
type NodeMetrics struct {
	CPU, Memory ResourceData
}

// UpstreamCPU is how a plugin reads a node's CPU utilisation (percent) from an upstream
// metric list, when its upstream counterpart does not read it the way GetResourceData does;
// ok is false when the list holds nothing it reads. Only upstream documents need it: Berth's
// typed form names the average, so there is nothing to interpret.
type UpstreamCPU func(ms []watcher.Metric) (percent float64, ok bool)

// Freshness classifies a node's metrics at the time of a read.
type Freshness int

const (
	Fresh Freshness = iota
	// Missing: no snapshot yet, or the node is not in it.
	Missing
	// Stale: the watcher itself flagged the node (berthNodes[node].stale).
	Stale
	// Expired: the newest sample behind the node is older than metricsExpirySeconds.
	Expired
)

func (f Freshness) String() string {
	switch f {
	case Fresh:
		return "fresh"
	case Missing:
		return "missing"
	case Stale:
		return "stale"
	case Expired:
		return "expired"
	}
	return "unknown"
}

type nodeEntry struct {
	metrics    NodeMetrics
	hasMetrics bool
	stale      bool
	// updated is the node's sample time on the scheduler's clock.
	updated time.Time
	// reported are the pod UIDs the agent saw; nil when the watcher did not say (upstream
	// watcher, or a Berth watcher without ?pods support).
	reported map[string]struct{}
	// shares are the listed pods' averages over the document's window, in percent of the
	// node (pods the agent listed and measured); nil without per-pod usage.
	shares map[string]PodShare
	// bucket is the node's placed pods in the tracker that installed this snapshot (nil when
	// none did: then the tracker is asked by name).
	bucket *bucket
	// derived caches what Score derives from the node object, so the object's quantities are
	// not parsed again for every pod (see NodeState.CapacityMilliCPU).
	derived atomic.Pointer[nodeDerived]
}

// nodeDerived is computed from one *v1.Node. The scheduler's cache replaces the object on every
// change of the node, so pointer identity says whether it is still current (and the pointer
// held here keeps the old object from being reused while compared).
type nodeDerived struct {
	node             *v1.Node
	capacityMilliCPU int64
}

// Snapshot is an immutable, parsed load watcher answer. It is swapped atomically, so any
// number of Score calls may read it while the next one is fetched.
type Snapshot struct {
	FetchedAt time.Time
	// Source is the document's source (BerthAgent, Prometheus, ...), for decision records.
	Source string
	nodes  map[string]*nodeEntry
	// newest is the most recent per-node sample time: tells "this node's agent is dead" from
	// "the whole signal is dead".
	newest time.Time
	// OutOfRange counts utilisation values of the document outside [0,100] % (clamped) or not
	// finite (ignored).
	OutOfRange int
	// Window is the length of the window the document's averages cover (its window.duration;
	// 15 minutes when it does not say): how long a placed pod takes to be all in them.
	Window time.Duration
	// PerPod says whether any node came with per-pod usage; without, placed pods' estimates
	// fade by time alone.
	PerPod bool
	// Form is the form the watcher answered in: FormTyped or FormUpstream ("" when built by
	// hand, as in tests).
	Form string
}

// The forms of a watcher answer (the form label of berth_loadaware_watcher_documents_total).
const (
	FormTyped    = "typed"
	FormUpstream = "upstream"
)

// listsPods says whether any node's pod list names a pod (nil-safe).
func (s *Snapshot) listsPods() bool {
	if s == nil {
		return false
	}
	for _, e := range s.nodes {
		if len(e.reported) > 0 {
			return true
		}
	}
	return false
}

// DefaultWindow is the window assumed for a document that names none (load-watcher's default).
const DefaultWindow = 15 * time.Minute

// PodShare is one pod's measured use, in percent of its node: CPU and Memory are its averages
// over the scored window (what of the pod the node's window average already holds), LatestCPU
// and LatestMemory its newest sample (what it uses now).
type PodShare struct {
	CPU, Memory             float64
	LatestCPU, LatestMemory float64
}

// NewSnapshot digests an upstream-form watcher response. fetchedAt is the scheduler's clock when
// the answer arrived; serverNow is the watcher's clock at that moment (HTTP Date header), or zero
// when unknown. Watcher timestamps are rebased onto the scheduler's clock with them, so clock skew
// between the two machines does not make fresh data look expired (or the reverse).
func NewSnapshot(resp *loadapi.Response, fetchedAt, serverNow time.Time) *Snapshot {
	return newUpstreamSnapshot(resp, fetchedAt, serverNow, nil)
}

// newUpstreamSnapshot is NewSnapshot with the plugin's own reading of CPU (nil: GetResourceData's).
func newUpstreamSnapshot(resp *loadapi.Response, fetchedAt, serverNow time.Time, cpu UpstreamCPU) *Snapshot {
	// Upstream documents carry one time for all nodes; Window.End is the same instant in
	// load-watcher, Timestamp the one Berth's contract names.
	docTime := resp.Timestamp
	if docTime == 0 {
		docTime = resp.Window.End
	}
	n, size := snapshotSize(resp)
	b := newBuilder(resp.Source, resp.Window.Duration, n, size, fetchedAt, serverNow, docTime)
	for name, nm := range resp.Data.NodeMetricsMap {
		e := b.get(name)
		var bad int
		e.metrics, bad = digest(nm.Metrics, cpu)
		b.s.OutOfRange += bad
		e.hasMetrics = true
	}
	for name, st := range resp.Nodes {
		b.status(name, st.Updated, st.Stale, st.PodUIDs, st.Pods, resp.Window.Duration)
	}
	return b.finish()
}

// NewLoadSnapshot digests Berth's typed form (loadapi.Load); fetchedAt and serverNow as for
// NewSnapshot. Values outside [0,100] % are clamped and counted like the upstream form's.
func NewLoadSnapshot(doc *loadapi.Load, fetchedAt, serverNow time.Time) *Snapshot {
	size := 0
	for name := range doc.Nodes {
		size += len(name)
	}
	b := newBuilder(doc.Source, doc.Window, len(doc.Nodes), size, fetchedAt, serverNow, doc.Timestamp)
	for name, nl := range doc.Nodes {
		e := b.status(name, nl.Updated, nl.Stale, nl.PodUIDs, nl.Pods, doc.Window)
		if nl.CPU == nil && nl.Memory == nil {
			continue
		}
		e.hasMetrics = true
		e.metrics.CPU = b.resource(nl.CPU)
		e.metrics.Memory = b.resource(nl.Memory)
	}
	return b.finish()
}

// builder fills a Snapshot whose size is known in advance. Every Score call looks its node up
// in the result, from many goroutines and with the rest of the cycle's data competing for the
// cache: the entries sit in one array and the names in one string, so the lookups of a cycle
// touch a few contiguous blocks, not one scattered allocation per node and per name.
type builder struct {
	s                   *Snapshot
	fetchedAt, serverAt time.Time
	docTime             int64
	n, size             int
	arena               strings.Builder
	entries             []nodeEntry
	order               []string
}

func newBuilder(source, window string, n, size int, fetchedAt, serverNow time.Time, docTime int64) *builder {
	b := &builder{
		s:         &Snapshot{FetchedAt: fetchedAt, Source: source, Window: DefaultWindow},
		fetchedAt: fetchedAt, serverAt: serverNow, docTime: docTime, n: n, size: size,
		entries: make([]nodeEntry, 0, n),
		order:   make([]string, 0, n),
	}
	if d, err := time.ParseDuration(window); err == nil && d > 0 {
		b.s.Window = d
	}
	b.arena.Grow(size)
	b.s.nodes = make(map[string]*nodeEntry, n)
	return b
}

// toLocal rebases a watcher Unix time onto the scheduler's clock.
func (b *builder) toLocal(unix int64) time.Time {
	t := time.Unix(unix, 0)
	if b.serverAt.IsZero() {
		return t
	}
	return b.fetchedAt.Add(-b.serverAt.Sub(t))
}

// get returns name's entry, adding it (stamped with the document's time) on first use.
func (b *builder) get(name string) *nodeEntry {
	e := b.s.nodes[name]
	if e == nil {
		// Keys are sliced from the arena once it is complete (finish); until then the
		// document's own strings serve.
		b.entries = append(b.entries, nodeEntry{updated: b.toLocal(b.docTime)})
		e = &b.entries[len(b.entries)-1]
		b.s.nodes[name] = e
		b.arena.WriteString(name)
		b.order = append(b.order, name)
	}
	return e
}

// status records a node's freshness and pods, the same in both forms.
func (b *builder) status(name string, updated int64, stale bool, uids []string, pods []loadapi.PodUsage, window string) *nodeEntry {
	e := b.get(name)
	if updated != 0 {
		e.updated = b.toLocal(updated)
	}
	e.stale = stale
	if len(uids) > 0 {
		e.reported = make(map[string]struct{}, len(uids))
		for _, uid := range uids {
			e.reported[uid] = struct{}{}
		}
	}
	b.s.OutOfRange += e.digestPods(pods, window)
	b.s.PerPod = b.s.PerPod || e.shares != nil
	return e
}

// resource reads one typed resource, clamping into [0,100] % whatever the watcher served.
func (b *builder) resource(r *loadapi.ResourceLoad) ResourceData {
	if r == nil {
		return ResourceData{}
	}
	avg, ok1 := b.clamp(r.Avg)
	std, ok2 := b.clamp(r.Std)
	if !ok1 {
		return ResourceData{}
	}
	if !ok2 {
		std = 0
	}
	return ResourceData{Avg: avg, Std: std, Valid: true}
}

func (b *builder) clamp(v float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		b.s.OutOfRange++
		return 0, false
	}
	if v < 0 || v > 100 {
		b.s.OutOfRange++
	}
	return min(max(v, 0), 100), true
}

// finish keys the map from the arena and notes the newest fresh sample.
func (b *builder) finish() *Snapshot {
	if len(b.entries) != b.n || b.arena.Len() != b.size {
		// Cannot happen (entries never grows past n, so its pointers stay valid); checked
		// because a reallocation would leave the map pointing at copies.
		panic(fmt.Sprintf("loadaware: snapshot sized %d nodes/%d bytes, filled %d/%d", b.n, b.size, len(b.entries), b.arena.Len()))
	}
	s := b.s
	s.nodes = rekey(b.arena.String(), b.order, b.entries)
	for _, e := range s.nodes {
		if e.hasMetrics && !e.stale && e.updated.After(s.newest) {
			s.newest = e.updated
		}
	}
	return s
}

// snapshotSize counts the nodes a response names (in either part, once) and their names' bytes.
func snapshotSize(resp *loadapi.Response) (n, size int) {
	n = len(resp.Data.NodeMetricsMap)
	for name := range resp.Data.NodeMetricsMap {
		size += len(name)
	}
	for name := range resp.Nodes {
		if _, dup := resp.Data.NodeMetricsMap[name]; !dup {
			n++
			size += len(name)
		}
	}
	return n, size
}

// rekey maps each name of order, sliced from keys (the names written one after another), to
// its entry.
func rekey(keys string, order []string, entries []nodeEntry) map[string]*nodeEntry {
	m := make(map[string]*nodeEntry, len(order))
	off := 0
	for i, name := range order {
		m[keys[off:off+len(name)]] = &entries[i]
		off += len(name)
	}
	return m
}

// digest reads a node's upstream metric list into Berth's typed form, clamping every CPU and
// memory value into [0,100] % whatever the watcher served (a third-party watcher may serve
// negative or huge numbers, and scores computed from them leave their range); bad counts the
// values changed or ignored. cpu, when set, replaces GetResourceData's reading of the CPU average.
func digest(ms []watcher.Metric, cpu UpstreamCPU) (out NodeMetrics, bad int) {
	out, bad = digestResourceData(ms)
	if cpu != nil {
		v, ok := cpu(ms)
		out.CPU.Valid = ok && !math.IsNaN(v) && !math.IsInf(v, 0)
		// The value was counted above, when the list was read.
		out.CPU.Avg = 0
		if out.CPU.Valid {
			out.CPU.Avg = min(max(v, 0), 100)
		}
	}
	return out, bad
}

// digestResourceData is upstream's GetResourceData over a node's list, both resources.
func digestResourceData(ms []watcher.Metric) (out NodeMetrics, bad int) {
	avgSeen := map[string]bool{}
	for _, m := range ms {
		if m.Type == watcher.CPU || m.Type == watcher.Memory {
			if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
				bad++
				continue
			}
			if m.Value < 0 || m.Value > 100 {
				bad++
				m.Value = min(max(m.Value, 0), 100)
			}
		}
		var rd *ResourceData
		switch m.Type {
		case watcher.CPU:
			rd = &out.CPU
		case watcher.Memory:
			rd = &out.Memory
		default:
			continue
		}
		rd.Valid = true
		switch m.Operator {
		case watcher.Average:
			rd.Avg = m.Value
			avgSeen[m.Type] = true
		case watcher.Std:
			rd.Std = m.Value
		case watcher.Latest, "":
			if !avgSeen[m.Type] {
				rd.Avg = m.Value
			}
		}
	}
	return out, bad
}

// digestPods keeps the pods' shares of the served window, for pods the node also lists (a
// share of a pod the node does not list is ignored: it could only be subtracted wrongly).
// Values outside [0,100] % are clamped, non-finite ones dropped; bad counts both.
func (e *nodeEntry) digestPods(pods []loadapi.PodUsage, window string) (bad int) {
	if len(pods) == 0 || e.reported == nil {
		return 0
	}
	e.shares = make(map[string]PodShare, len(pods))
	clamp := func(v float64) (float64, bool) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			bad++
			return 0, false
		}
		if v < 0 || v > 100 {
			bad++
		}
		return min(max(v, 0), 100), true
	}
	for _, p := range pods {
		if _, ok := e.reported[p.UID]; !ok {
			continue
		}
		for _, w := range p.Windows {
			if w.Window != window {
				continue
			}
			c, ok1 := clamp(w.CPU)
			m, ok2 := clamp(w.Memory)
			lc, ok3 := clamp(p.Latest.CPU)
			lm, ok4 := clamp(p.Latest.Memory)
			if ok1 && ok2 && ok3 && ok4 {
				e.shares[p.UID] = PodShare{CPU: c, Memory: m, LatestCPU: lc, LatestMemory: lm}
			}
		}
	}
	return bad
}

// NodeView is what a plugin gets for one node.
type NodeView struct {
	Freshness Freshness
	Metrics   NodeMetrics
	// Updated is the node's sample time on the scheduler's clock (zero if Missing).
	Updated time.Time
	// Window is the length of the window the averages cover.
	Window   time.Duration
	reported map[string]struct{}
	shares   map[string]PodShare
}

// Share is what the node's window average already holds of pod uid; ok is false when the
// watcher sent no usage for it.
func (v NodeView) Share(uid string) (PodShare, bool) {
	s, ok := v.shares[uid]
	return s, ok
}

// Node looks a node up at time now with the given expiry. A nil snapshot is all Missing.
func (s *Snapshot) Node(name string, now time.Time, expiry time.Duration) NodeView {
	v, _ := s.node(name, now, expiry)
	return v
}

// has says whether the document named the node (nil-safe).
func (s *Snapshot) has(name string) bool {
	if s == nil {
		return false
	}
	_, ok := s.nodes[name]
	return ok
}

// node is Node plus the node's entry (for its tracker bucket and caches), from the same map
// lookup; the entry is nil when the document does not name the node.
func (s *Snapshot) node(name string, now time.Time, expiry time.Duration) (NodeView, *nodeEntry) {
	if s == nil {
		return NodeView{Freshness: Missing, Window: DefaultWindow}, nil
	}
	e := s.nodes[name]
	if e == nil {
		return NodeView{Freshness: Missing, Window: s.Window}, nil
	}
	v := NodeView{Metrics: e.metrics, Updated: e.updated, Window: s.Window, reported: e.reported, shares: e.shares}
	switch {
	case e.stale:
		v.Freshness = Stale
	case !e.hasMetrics:
		v.Freshness = Missing
	case now.Sub(e.updated) > expiry:
		v.Freshness = Expired
	default:
		v.Freshness = Fresh
	}
	return v, e
}

// SignalAlive reports whether any node's metrics are within expiry: when none is, the load
// watcher (or its source) is down as a whole and Block must not stop all scheduling.
func (s *Snapshot) SignalAlive(now time.Time, expiry time.Duration) bool {
	return s != nil && !s.newest.IsZero() && now.Sub(s.newest) <= expiry
}

// Reported says whether the agent listed uid for this node; known is false when the watcher
// gave no pod list for it (then only time tells).
func (v NodeView) Reported(uid string) (reported, known bool) {
	if v.reported == nil {
		return false, false
	}
	_, ok := v.reported[uid]
	return ok, true
}
