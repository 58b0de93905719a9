package loadwatcher

import (
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
	// Windows are the node's numbers per window name ("5m", "10m", "15m"), typed; the upstream
	// metric lists are written from them when served.
	Windows map[string]WindowLoad
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
	names      metricNames // upstream metric names of the source's numbers

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
	return &Store{source: source, staleAfter: staleAfter, names: defaultMetricNames[source], nodes: map[string]*NodeLoad{}}
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
	w, d := windowOf(q)
	resp.Timestamp = now.Unix()
	resp.Window = watcher.Window{Duration: w, Start: now.Add(-d).Unix(), End: now.Unix()}
	resp.Source = s.source
	resp.Data.NodeMetricsMap = watcher.NodeMetricsMap{}
	resp.Nodes = map[string]NodeStatus{}
	b.Gen, b.NextFlip, b.Found = s.walk(q, now, func(name string, l *NodeLoad, st NodeStatus, names metricNames) {
		resp.Nodes[name] = st
		if wl, ok := l.window(w); ok && !st.Stale {
			resp.Data.NodeMetricsMap[name] = watcher.NodeMetrics{Metrics: names.metricsOf(wl, w)}
		}
	})
	return b
}

// LoadDoc is Berth's typed document with what tells when it goes out of date (as Built).
type LoadDoc struct {
	loadapi.Load
	Found    bool
	Gen      uint64
	NextFlip time.Time
}

// BuildLoad is Build in Berth's typed form: the same nodes, freshness and pods, each resource
// read from the stored numbers (Usage.resource), not from a metric list.
func (s *Store) BuildLoad(q Query, now time.Time) (b LoadDoc) {
	w, _ := windowOf(q)
	b.Load = loadapi.Load{Timestamp: now.Unix(), Window: w, Source: s.source, Nodes: map[string]loadapi.NodeLoad{}}
	b.Gen, b.NextFlip, b.Found = s.walk(q, now, func(name string, l *NodeLoad, st NodeStatus, _ metricNames) {
		nl := loadapi.NodeLoad{Updated: st.Updated, Stale: st.Stale, PodUIDs: st.PodUIDs, Pods: st.Pods}
		if wl, ok := l.window(w); ok && !st.Stale {
			nl.CPU, nl.Memory = wl.CPU.resource(), wl.Memory.resource()
		}
		b.Nodes[name] = nl
	})
	return b
}

// windowOf is q's window name and length.
func windowOf(q Query) (string, time.Duration) {
	w := q.Window
	if w == "" {
		w = DefaultWindow
	}
	d, _ := time.ParseDuration(w)
	return w, d
}

// window is the entry's numbers for window w, if it has any (nil-safe: a known node that never
// reported has no entry).
func (l *NodeLoad) window(w string) (WindowLoad, bool) {
	if l == nil {
		return WindowLoad{}, false
	}
	wl, ok := l.Windows[w]
	return wl, ok && wl.any()
}

// walk calls add, under the read lock, for every node q selects with its status at now (l nil
// for a known node that never reported). It returns the store's generation, the soonest a node
// served as fresh turns stale, and whether q.Node (when set) is stored or known.
func (s *Store) walk(q Query, now time.Time, add func(name string, l *NodeLoad, st NodeStatus, names metricNames)) (gen uint64, nextFlip time.Time, found bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	visit := func(name string, l *NodeLoad) {
		st := NodeStatus{Updated: l.Updated.Unix(), Stale: s.isStale(l, now)}
		if flip := l.Updated.Add(s.staleAfter); !st.Stale && (nextFlip.IsZero() || flip.Before(nextFlip)) {
			nextFlip = flip
		}
		if q.Pods {
			st.PodUIDs = l.PodUIDs
			st.Pods = l.Pods
		}
		add(name, l, st, s.names)
	}
	if q.Node != "" {
		if l, ok := s.nodes[q.Node]; ok {
			visit(q.Node, l)
			return s.gen, nextFlip, true
		}
		if _, ok := s.known[q.Node]; ok {
			add(q.Node, nil, NodeStatus{Stale: true}, s.names)
			return s.gen, nextFlip, true
		}
		return s.gen, nextFlip, false
	}
	for name, l := range s.nodes {
		visit(name, l)
	}
	for name := range s.known {
		if _, ok := s.nodes[name]; !ok {
			add(name, nil, NodeStatus{Stale: true}, s.names)
		}
	}
	return s.gen, nextFlip, true
}
