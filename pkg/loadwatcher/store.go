package loadwatcher

import (
	"slices"
	"sync"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// Source names, as served in the document's "source" field.
const (
	SourceAgent         = "BerthAgent"
	SourcePrometheus    = "Prometheus"
	SourceMetricsServer = "KubernetesMetricsServer"
)

// DefaultWindow is what GET /watcher serves without ?window=, as upstream load-watcher does.
const DefaultWindow = watcher.FifteenMinutes

// NodeLoad is one node's newest numbers.
type NodeLoad struct {
	// Updated is the time of the newest sample behind the numbers.
	Updated time.Time
	// Metrics per window name ("5m", "10m", "15m"), in the order they are served.
	Metrics map[string][]watcher.Metric
	PodUIDs []string
	// Pods is the agents' per-pod usage (served with PodUIDs).
	Pods []loadapi.PodUsage
	// Instance and Seq identify an agent report (loadapi.Report); empty for pull sources.
	Instance string
	Seq      uint64

	enc *nodeEnc // JSON pieces of this entry, filled when first served (set by Put)
}

// Store holds per-node load and builds the /watcher document. Safe for concurrent use.
type Store struct {
	source     string
	staleAfter time.Duration

	mu    sync.RWMutex
	nodes map[string]*NodeLoad
	// gen counts changes: a served document built at gen g is current while gen is still g
	// and no node has crossed the staleness limit since (see Build).
	gen uint64
	// known are the cluster's nodes (from a node informer), so a node that never reported is
	// listed as missing instead of being silently absent. nil means "not tracked".
	known map[string]struct{}
}

// NewStore returns an empty store for the named source; entries older than staleAfter are
// reported as stale.
func NewStore(source string, staleAfter time.Duration) *Store {
	return &Store{source: source, staleAfter: staleAfter, nodes: map[string]*NodeLoad{}}
}

// StaleAfter is the staleness limit.
func (s *Store) StaleAfter() time.Duration { return s.staleAfter }

// Put stores a node's load in the order Puts arrive (the watcher's receive time), except that a
// report of the same agent run (Instance) with a Seq not above the stored one is a late retry and
// is dropped. The sample time never decides: an agent clock that was ahead must not make the
// honest reports that follow look old. It reports whether the entry was stored.
func (s *Store) Put(node string, l NodeLoad) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.nodes[node]; ok && l.Instance != "" && l.Instance == cur.Instance && l.Seq <= cur.Seq {
		return false
	}
	l.enc = &nodeEnc{}
	s.nodes[node] = &l
	s.gen++
	return true
}

// SetKnown records whether a node exists in the cluster; forgetting a node drops its load too.
func (s *Store) SetKnown(node string, exists bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		s.known = map[string]struct{}{}
	}
	if exists {
		if _, ok := s.known[node]; !ok {
			s.known[node] = struct{}{}
			s.gen++
		}
		return
	}
	_, k := s.known[node]
	_, d := s.nodes[node]
	if k || d {
		delete(s.known, node)
		delete(s.nodes, node)
		s.gen++
	}
}

// Generation changes whenever the stored data or the set of known nodes does.
func (s *Store) Generation() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gen
}

// Get returns a copy of a node's entry.
func (s *Store) Get(node string) (NodeLoad, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, ok := s.nodes[node]
	if !ok {
		return NodeLoad{}, false
	}
	return *l, true
}

// Len is the number of nodes with data.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.nodes)
}

// Counts returns how many nodes are fresh, stale and missing (known without data) at now.
func (s *Store) Counts(now time.Time) (fresh, stale, missing int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, l := range s.nodes {
		if s.isStale(l, now) {
			stale++
		} else {
			fresh++
		}
	}
	for n := range s.known {
		if _, ok := s.nodes[n]; !ok {
			missing++
		}
	}
	return fresh, stale, missing
}

func (s *Store) isStale(l *NodeLoad, now time.Time) bool {
	return now.Sub(l.Updated) > s.staleAfter
}

// Query selects what Response returns.
type Query struct {
	Window string // "" = DefaultWindow
	Node   string // "" = every node
	Pods   bool   // include PodUIDs and Pods
	// Typed selects Berth's typed form (loadapi.Load, asked for with Accept), built from the
	// same Response; the upstream document otherwise.
	Typed bool
}

// Response builds the document at now. found is false when q.Node is neither stored nor known.
// Stale and missing nodes appear only in Nodes (berthNodes), never in NodeMetricsMap, so a
// client that only reads the upstream fields sees them as "no metrics", never as idle.
func (s *Store) Response(q Query, now time.Time) (resp Response, found bool) {
	b := s.Build(q, now)
	return b.Response, b.Found
}

// Built is a document with what tells when it goes out of date.
type Built struct {
	Response
	Found bool
	// Gen is the store's generation the document was built from.
	Gen uint64
	// NextFlip is when the first node served as fresh turns stale (zero: none will): the
	// document's content changes then although the store does not.
	NextFlip time.Time
}

// Build is Response with the generation and the next staleness transition.
func (s *Store) Build(q Query, now time.Time) (b Built) {
	resp := &b.Response
	w := q.Window
	if w == "" {
		w = DefaultWindow
	}
	d, _ := time.ParseDuration(w)
	resp.Timestamp = now.Unix()
	resp.Window = watcher.Window{Duration: w, Start: now.Add(-d).Unix(), End: now.Unix()}
	resp.Source = s.source

	s.mu.RLock()
	defer s.mu.RUnlock()
	b.Gen = s.gen
	n := len(s.nodes)
	if q.Node != "" {
		n = 1
	}
	resp.Data.NodeMetricsMap = make(watcher.NodeMetricsMap, n)
	if q.Node == "" {
		n = max(n, len(s.known))
	}
	resp.Nodes = make(map[string]NodeStatus, n)
	add := func(name string, l *NodeLoad) {
		st := NodeStatus{Updated: l.Updated.Unix(), Stale: s.isStale(l, now)}
		if flip := l.Updated.Add(s.staleAfter); !st.Stale && (b.NextFlip.IsZero() || flip.Before(b.NextFlip)) {
			b.NextFlip = flip
		}
		if q.Pods {
			st.PodUIDs = l.PodUIDs
			st.Pods = l.Pods
		}
		resp.Nodes[name] = st
		if m := l.Metrics[w]; !st.Stale && len(m) > 0 {
			// Copy: the encoder runs after the lock is released and a Put may replace l.
			resp.Data.NodeMetricsMap[name] = watcher.NodeMetrics{Metrics: slices.Clone(m)}
		}
	}
	if q.Node != "" {
		if l, ok := s.nodes[q.Node]; ok {
			add(q.Node, l)
			b.Found = true
			return b
		}
		if _, ok := s.known[q.Node]; ok {
			resp.Nodes[q.Node] = NodeStatus{Stale: true}
			b.Found = true
		}
		return b
	}
	for name, l := range s.nodes {
		add(name, l)
	}
	for name := range s.known {
		if _, ok := s.nodes[name]; !ok {
			resp.Nodes[name] = NodeStatus{Stale: true}
		}
	}
	b.Found = true
	return b
}

// MetricsFromReport turns an agent report into the served metrics per window. Per window the
// order is Latest, AVG, STD for CPU then Memory: upstream TargetLoadPacking takes the last CPU
// metric whose operator is AVG or Latest, and the resource-stats helper takes Latest only when
// no AVG was seen before it, so with this order both read the window average.
func MetricsFromReport(r *Report) map[string][]watcher.Metric {
	out := make(map[string][]watcher.Metric, len(r.Windows))
	for _, w := range r.Windows {
		out[w.Window] = []watcher.Metric{
			{Name: "berth_node_cpu_utilisation", Type: watcher.CPU, Operator: watcher.Latest, Value: r.Latest.CPU},
			{Name: "berth_node_cpu_utilisation", Type: watcher.CPU, Operator: watcher.Average, Rollup: w.Window, Value: w.CPU.Avg},
			{Name: "berth_node_cpu_utilisation", Type: watcher.CPU, Operator: watcher.Std, Rollup: w.Window, Value: w.CPU.Std},
			{Name: "berth_node_memory_utilisation", Type: watcher.Memory, Operator: watcher.Latest, Value: r.Latest.Memory},
			{Name: "berth_node_memory_utilisation", Type: watcher.Memory, Operator: watcher.Average, Rollup: w.Window, Value: w.Memory.Avg},
			{Name: "berth_node_memory_utilisation", Type: watcher.Memory, Operator: watcher.Std, Rollup: w.Window, Value: w.Memory.Std},
		}
	}
	return out
}
