package loadwatcher

import (
	"bytes"
	"encoding/json"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// acceptsLoad says whether an Accept header asks for Berth's typed form (loadapi.LoadMediaType
// listed with a quality above 0). Clients that do not name it (upstream Trimaran, paypal's
// client, curl) keep getting the upstream document.
func acceptsLoad(header string) bool {
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != loadapi.LoadMediaType {
			continue
		}
		if q, ok := params["q"]; ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// loadJSON is the entry's window w in the typed form, the members "cpu":{...},"memory":{...}
// without braces (empty when it has neither), encoded once per window and kept.
func (l *NodeLoad) loadJSON(w string) []byte {
	enc := func() []byte {
		wl, _ := l.window(w)
		b, _ := json.Marshal(struct {
			CPU    *loadapi.ResourceLoad `json:"cpu,omitempty"`
			Memory *loadapi.ResourceLoad `json:"memory,omitempty"`
		}{wl.CPU.resource(), wl.Memory.resource()})
		return b[1 : len(b)-1]
	}
	i := windowIndex(w)
	if i < 0 {
		return enc()
	}
	if b := l.enc.typed[i].Load(); b != nil {
		return *b
	}
	b := enc()
	l.enc.typed[i].Store(&b)
	return b
}

// EncodeLoad appends the typed document (q.Node must be empty) to buf, byte for byte what
// encoding/json's Encoder writes for BuildLoad's Load, from per-node pieces cached with each
// stored entry, as EncodeDocument does for the upstream one: after one report only that node is
// encoded again. It returns the same generation and next staleness transition as BuildLoad.
func (s *Store) EncodeLoad(buf []byte, q Query, now time.Time) (out []byte, gen uint64, nextFlip time.Time) {
	w, _ := windowOf(q)
	s.mu.RLock()
	defer s.mu.RUnlock()
	gen = s.gen
	buf = append(buf, `{"timestamp":`...)
	buf = strconv.AppendInt(buf, now.Unix(), 10)
	buf = append(buf, `,"window":`...)
	buf = appendString(buf, w)
	buf = append(buf, `,"source":`...)
	buf = appendString(buf, s.source)
	buf = append(buf, `,"nodes":{`...)
	for i, name := range s.namesLocked() {
		if i > 0 {
			buf = append(buf, ',')
		}
		l, ok := s.nodes[name]
		if !ok {
			buf = appendString(buf, name)
			buf = append(buf, `:{"updated":0,"stale":true}`...)
			continue
		}
		stale := s.isStale(l, now)
		if flip := l.Updated.Add(s.staleAfter); !stale && (nextFlip.IsZero() || flip.Before(nextFlip)) {
			nextFlip = flip
		}
		buf = append(buf, l.nameJSON(name)...)
		buf = append(buf, `:{"updated":`...)
		buf = strconv.AppendInt(buf, l.Updated.Unix(), 10)
		if stale {
			buf = append(buf, `,"stale":true`...)
		} else if m := l.loadJSON(w); len(m) > 0 {
			buf = append(buf, ',')
			buf = append(buf, m...)
		}
		buf = l.appendPods(buf, q.Pods)
		buf = append(buf, '}')
	}
	return append(buf, "}}\n"...), gen, nextFlip
}

// appendPods appends the entry's pod UIDs and usage members when pods is set (both forms name
// them alike).
func (l *NodeLoad) appendPods(buf []byte, pods bool) []byte {
	if pods && len(l.PodUIDs) > 0 {
		buf = append(buf, `,"podUIDs":`...)
		buf = append(buf, l.podsJSON()...)
	}
	if pods && len(l.Pods) > 0 {
		buf = append(buf, `,"pods":`...)
		buf = append(buf, l.usageJSON()...)
	}
	return buf
}

// encodeLoad encodes a typed document.
func encodeLoad(b *LoadDoc) (*doc, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(&b.Load); err != nil {
		return nil, err
	}
	d := newDoc(buf.Bytes())
	d.contentType = loadapi.LoadMediaType
	d.gen, d.nextFlip = b.Gen, b.NextFlip
	return d, nil
}
