package loadwatcher

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// doc is one encoded /watcher answer. Immutable once built, except gz, which the first client
// that accepts gzip fills in (once; concurrent ones wait for it).
type doc struct {
	body []byte
	etag string
	gz   []byte
	// contentType is the body's media type: "" for the upstream document (application/json),
	// loadapi.LoadMediaType for Berth's typed form.
	contentType string

	gen      uint64
	nextFlip time.Time
	gzOnce   sync.Once
}

// etagSeed makes ETags content hashes that differ between processes only by seed, which is
// harmless: a client holding another process's ETag just gets a 200.
var etagSeed = maphash.MakeSeed()

func encodeDoc(resp *Response) (*doc, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(resp); err != nil {
		return nil, err
	}
	return newDoc(buf.Bytes()), nil
}

func newDoc(b []byte) *doc {
	return &doc{body: b, etag: fmt.Sprintf(`"%016x-%x"`, maphash.Bytes(etagSeed, b), len(b))}
}

// current says whether d still is what the store would serve at now: nothing was stored since
// and no node served as fresh has crossed the staleness limit.
func (d *doc) current(gen uint64, now time.Time) bool {
	return d.gen == gen && (d.nextFlip.IsZero() || !now.After(d.nextFlip))
}

// gzipped returns the gzip encoding of the body, compressing on first use only.
func (d *doc) gzipped() []byte {
	d.gzOnce.Do(func() {
		var buf bytes.Buffer
		// BestSpeed: most of the size saving at a fraction of the default level's cost
		// (BenchmarkWatcher5000Nodes reports both).
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		_, _ = zw.Write(d.body)
		if zw.Close() == nil {
			d.gz = buf.Bytes()
		}
	})
	return d.gz
}

// serve answers with 304 when the client already has this version, else with the body,
// gzipped when the client accepts it.
func (d *doc) serve(w http.ResponseWriter, r *http.Request) int {
	h := w.Header()
	h.Set("ETag", d.etag)
	// Accept chooses the form (typed or upstream), Accept-Encoding the compression.
	h.Set("Vary", "Accept, Accept-Encoding")
	if etagMatches(r.Header.Get("If-None-Match"), d.etag) {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	body := d.body
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		if gz := d.gzipped(); gz != nil {
			body = gz
			h.Set("Content-Encoding", "gzip")
		}
	}
	if d.contentType != "" {
		h.Set("Content-Type", d.contentType)
	} else {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
	return http.StatusOK
}

// etagMatches implements If-None-Match's weak comparison (RFC 9110 13.1.2).
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// acceptsGzip reads Accept-Encoding; "gzip;q=0" refuses it.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		if q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// docCache holds the encoded full documents, one per variant (window × pods × form): every request
// between two store changes is served from memory, and concurrent requests after a change wait
// for one encoding instead of each doing their own.
type docCache struct {
	mu   sync.Mutex
	docs map[Query]*doc
}

func (c *docCache) get(s *Server, q Query, now time.Time) *doc {
	if q.Window == "" {
		q.Window = DefaultWindow
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.docs[q]; d != nil && d.current(s.Store.Generation(), now) {
		return d
	}
	// Assembled from per-node pieces: after one report only that node is encoded again.
	var size int
	if old := c.docs[q]; old != nil {
		size = len(old.body) + len(old.body)/8
	}
	encode := s.Store.EncodeDocument
	if q.Typed {
		encode = s.Store.EncodeLoad
	}
	body, gen, flip := encode(make([]byte, 0, size), q, now)
	d := newDoc(body)
	if q.Typed {
		d.contentType = loadapi.LoadMediaType
	}
	d.gen, d.nextFlip = gen, flip
	c.store(q, d)
	s.builds.Inc()
	return d
}

func (c *docCache) store(q Query, d *doc) {
	if c.docs == nil {
		c.docs = map[Query]*doc{}
	}
	c.docs[q] = d
}
