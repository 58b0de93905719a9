package loadwatcher

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
)

// nodeEnc caches the JSON of one stored entry, so that a change of one node re-encodes one
// node, not 5000: the full document is assembled from these pieces. An entry is replaced, never
// modified, on Put, which drops its cache with it. Pieces are filled on first use; the docCache
// mutex serialises the builds that fill them, and the atomics keep concurrent readers safe.
type nodeEnc struct {
	metrics [3]atomic.Pointer[[]byte] // per window (WindowNames order): {"metrics":[...],...}
	typed   [3]atomic.Pointer[[]byte] // per window: "cpu":{...},"memory":{...} of the typed form
	pods    atomic.Pointer[[]byte]    // ["uid",...]
	usage   atomic.Pointer[[]byte]    // [{"uid":...},...]
	name    atomic.Pointer[[]byte]    // the node's name as a JSON string
}

// cachedJSON returns the JSON of v, encoded on first use and kept in p after.
func cachedJSON(p *atomic.Pointer[[]byte], v any) []byte {
	if b := p.Load(); b != nil {
		return *b
	}
	b, _ := json.Marshal(v)
	p.Store(&b)
	return b
}

func (l *NodeLoad) nameJSON(name string) []byte { return cachedJSON(&l.enc.name, name) }

func windowIndex(w string) int {
	for i, n := range WindowNames {
		if n == w {
			return i
		}
	}
	return -1
}

// metricsJSON is the entry's window w as upstream's NodeMetrics, written from its typed
// numbers under the source's metric names.
func (l *NodeLoad) metricsJSON(w string, names metricNames) []byte {
	nm := func() watcher.NodeMetrics { return watcher.NodeMetrics{Metrics: names.metricsOf(l.Windows[w], w)} }
	if i := windowIndex(w); i >= 0 {
		if b := l.enc.metrics[i].Load(); b != nil {
			return *b
		}
		return cachedJSON(&l.enc.metrics[i], nm())
	}
	b, _ := json.Marshal(nm())
	return b
}

func (l *NodeLoad) podsJSON() []byte { return cachedJSON(&l.enc.pods, l.PodUIDs) }

func (l *NodeLoad) usageJSON() []byte { return cachedJSON(&l.enc.usage, l.Pods) }

// appendString appends s as a JSON string, escaped exactly as encoding/json does.
func appendString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(buf, b...)
}

// EncodeDocument appends the full document (q.Node must be empty) to buf, byte for byte what
// encoding/json's Encoder writes for Build's Response, from the per-node pieces. It returns the
// same generation and next staleness transition as Build.
func (s *Store) EncodeDocument(buf []byte, q Query, now time.Time) (out []byte, gen uint64, nextFlip time.Time) {
	w := q.Window
	if w == "" {
		w = DefaultWindow
	}
	d, _ := time.ParseDuration(w)
	s.mu.RLock()
	defer s.mu.RUnlock()
	gen = s.gen

	buf = append(buf, `{"timestamp":`...)
	buf = strconv.AppendInt(buf, now.Unix(), 10)
	win, _ := json.Marshal(watcher.Window{Duration: w, Start: now.Add(-d).Unix(), End: now.Unix()})
	buf = append(buf, `,"window":`...)
	buf = append(buf, win...)
	buf = append(buf, `,"source":`...)
	buf = appendString(buf, s.source)
	buf = append(buf, `,"data":{"NodeMetricsMap":{`...)
	names := s.namesLocked()
	buf, stale, nextFlip := s.appendMetricsMapLocked(buf, names, w, now)
	buf = append(buf, "}}"...)
	if len(names) > 0 {
		buf = append(buf, `,"berthNodes":{`...)
		buf = s.appendBerthNodesLocked(buf, names, stale, q.Pods)
		buf = append(buf, '}')
	}
	buf = append(buf, "}\n"...)
	return buf, gen, nextFlip
}

// namesLocked lists, sorted, the nodes with an entry and the known ones without.
func (s *Store) namesLocked() []string {
	names := make([]string, 0, max(len(s.nodes), len(s.known)))
	for name := range s.nodes {
		names = append(names, name)
	}
	for name := range s.known {
		if _, ok := s.nodes[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// appendMetricsMapLocked appends NodeMetricsMap's entries: the fresh nodes with metrics for
// window w. It returns which names are stale and the soonest a fresh one turns stale.
func (s *Store) appendMetricsMapLocked(buf []byte, names []string, w string, now time.Time) (out []byte, stale []bool, nextFlip time.Time) {
	stale = make([]bool, len(names))
	first := true
	for i, name := range names {
		l, ok := s.nodes[name]
		if !ok {
			continue
		}
		stale[i] = s.isStale(l, now)
		if stale[i] {
			continue
		}
		if flip := l.Updated.Add(s.staleAfter); nextFlip.IsZero() || flip.Before(nextFlip) {
			nextFlip = flip
		}
		if _, ok := l.window(w); !ok {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, l.nameJSON(name)...)
		buf = append(buf, ':')
		buf = append(buf, l.metricsJSON(w, s.names)...)
	}
	return buf, stale, nextFlip
}

// appendBerthNodesLocked appends berthNodes' entries, one per name; pods adds each node's pod
// UIDs and usage.
func (s *Store) appendBerthNodesLocked(buf []byte, names []string, stale []bool, pods bool) []byte {
	for i, name := range names {
		if i > 0 {
			buf = append(buf, ',')
		}
		l, ok := s.nodes[name]
		if !ok {
			buf = appendString(buf, name)
			buf = append(buf, `:{"updated":0,"stale":true}`...)
			continue
		}
		buf = append(buf, l.nameJSON(name)...)
		buf = append(buf, `:{"updated":`...)
		buf = strconv.AppendInt(buf, l.Updated.Unix(), 10)
		if stale[i] {
			buf = append(buf, `,"stale":true`...)
		}
		buf = l.appendPods(buf, pods)
		buf = append(buf, '}')
	}
	return buf
}
