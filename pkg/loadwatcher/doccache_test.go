package loadwatcher

import (
	"github.com/berth-sched/berth/pkg/loadapi"

	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	lwapi "github.com/paypal/load-watcher/pkg/watcher/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type answer struct {
	code int
	etag string
	enc  string
	body []byte
}

func get(t *testing.T, h http.Handler, path string, hdr map[string]string) answer {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return answer{rec.Code, rec.Header().Get("ETag"), rec.Header().Get("Content-Encoding"), rec.Body.Bytes()}
}

// The full document is encoded once per store change and variant; a client that sends the
// ETag it has gets 304 without a body until something changes, including a node turning stale
// with the store untouched.
func TestWatcherCacheETagAndStaleness(t *testing.T) {
	e := newTestEnv(t)
	h := e.srv.Handler()
	// Whole seconds: report times are Unix seconds, so this is the stored sample time exactly.
	reported := time.Unix(e.now.Unix(), 0)
	e.now = reported
	if code, body := e.post(t, "tok-a", reportFor("node-a", reported, 30)); code != http.StatusNoContent {
		t.Fatalf("%d %s", code, body)
	}
	first := get(t, h, "/watcher", nil)
	if first.code != 200 || first.etag == "" {
		t.Fatalf("first GET: %d etag %q", first.code, first.etag)
	}
	builds := testutil.ToFloat64(e.srv.builds)
	steps := []struct {
		name      string
		do        func()
		path      string
		hdr       map[string]string
		code      int
		sameETag  bool
		encodings float64 // documents encoded by this step
	}{
		{"same again: served from memory", nil, "/watcher", nil, 200, true, 0},
		{"If-None-Match with the current ETag: 304", nil, "/watcher", map[string]string{"If-None-Match": first.etag}, 304, true, 0},
		{"weak and listed ETags match too", nil, "/watcher", map[string]string{"If-None-Match": `"x", W/` + first.etag}, 304, true, 0},
		{"another ETag: 200", nil, "/watcher", map[string]string{"If-None-Match": `"other"`}, 200, true, 0},
		{"another variant is its own document", nil, "/watcher?pods=true", nil, 200, false, 1},
		{"time passes below the staleness limit: still 304", func() { e.now = reported.Add(5 * time.Minute) }, "/watcher", map[string]string{"If-None-Match": first.etag}, 304, true, 0},
		{"node-a turns stale with no report: new document", func() { e.now = reported.Add(5*time.Minute + time.Second) }, "/watcher", map[string]string{"If-None-Match": first.etag}, 200, false, 1},
	}
	for _, st := range steps {
		if st.do != nil {
			st.do()
		}
		a := get(t, h, st.path, st.hdr)
		got := testutil.ToFloat64(e.srv.builds)
		if a.code != st.code || (a.etag == first.etag) != st.sameETag || got-builds != st.encodings {
			t.Fatalf("%s: code %d (want %d), etag %q vs first %q (same wanted %v), %v encodings (want %v)",
				st.name, a.code, st.code, a.etag, first.etag, st.sameETag, got-builds, st.encodings)
		}
		if a.code == 304 && len(a.body) != 0 {
			t.Fatalf("%s: 304 with a body", st.name)
		}
		builds = got
	}
	var resp Response
	if err := json.Unmarshal(get(t, h, "/watcher", nil).body, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Nodes["node-a"].Stale || len(resp.Data.NodeMetricsMap) != 0 {
		t.Fatalf("after the staleness limit the cached document still serves node-a as fresh: %+v", resp)
	}
	// A report changes the store: the old ETag no longer matches.
	stale := get(t, h, "/watcher", nil).etag
	if code, _ := e.post(t, "tok-a", reportFor("node-a", e.now, 10)); code != http.StatusNoContent {
		t.Fatal("report refused")
	}
	if a := get(t, h, "/watcher", map[string]string{"If-None-Match": stale}); a.code != 200 || a.etag == stale {
		t.Fatalf("after a report: %d etag %q (old %q)", a.code, a.etag, stale)
	}
	// The per-node form has ETags too.
	one := get(t, h, "/watcher/node-a", nil)
	if one.code != 200 || one.etag == "" || get(t, h, "/watcher/node-a", map[string]string{"If-None-Match": one.etag}).code != 304 {
		t.Fatalf("per-node form: %d %q", one.code, one.etag)
	}
}

// gzip when asked, identical content, and the paypal client (Go's transport asks for gzip by
// itself) still decodes the answer.
func TestWatcherGzip(t *testing.T) {
	e := newTestEnv(t)
	h := e.srv.Handler()
	if code, body := e.post(t, "tok-a", reportFor("node-a", e.now, 30)); code != http.StatusNoContent {
		t.Fatalf("%d %s", code, body)
	}
	plain := get(t, h, "/watcher?pods=true", nil)
	cases := []struct {
		accept string
		gzip   bool
	}{{"gzip", true}, {"br, gzip;q=0.5", true}, {"GZIP", true}, {"gzip;q=0", false}, {"identity", false}, {"", false}}
	for _, tc := range cases {
		a := get(t, h, "/watcher?pods=true", map[string]string{"Accept-Encoding": tc.accept})
		if (a.enc == "gzip") != tc.gzip || a.etag != plain.etag {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q, etag %q (plain %q)", tc.accept, a.enc, a.etag, plain.etag)
		}
		body := a.body
		if tc.gzip {
			zr, err := gzip.NewReader(bytes.NewReader(a.body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(body, plain.body) {
			t.Fatalf("Accept-Encoding %q: content differs from the identity body", tc.accept)
		}
	}
	client, _ := lwapi.NewServiceClient(e.http.URL)
	m, err := client.GetLatestWatcherMetrics()
	if err != nil || len(m.Data.NodeMetricsMap) != 1 {
		t.Fatalf("paypal client over gzip: %+v %v", m, err)
	}
}

// The document assembled from per-node pieces is byte for byte what encoding/json writes for
// the same Response, in every variant and with fresh, stale and never-reported nodes.
func TestEncodeDocumentMatchesEncodingJSON(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	store := NewStore(SourceAgent, 5*time.Minute)
	for i, age := range []time.Duration{0, 4 * time.Minute, 6 * time.Minute, time.Second} {
		r := benchReport(i, now.Add(-age))
		if i == 3 {
			r.PodUIDs = nil      // no pods: no podUIDs key
			r.Node = `node-<&>"` // escaped as encoding/json escapes it
		}
		if i == 0 && len(r.PodUIDs) > 0 {
			r.Pods = []loadapi.PodUsage{{UID: r.PodUIDs[0], Latest: Latest{CPU: 1.5, Memory: 2},
				Windows: []loadapi.PodWindow{{Window: "15m", CPU: 0.25, Memory: 2}}, CPUMillicores: 60, MemoryBytes: 1 << 20}}
		}
		store.Put(r.Node, NodeLoad{Updated: now.Add(-age), Windows: WindowsFromReport(&r), PodUIDs: r.PodUIDs, Pods: r.Pods})
	}
	store.SetKnown("never-reported", true)
	for _, q := range []Query{{}, {Pods: true}, {Window: "5m"}, {Window: "10m", Pods: true}} {
		for pass := 0; pass < 2; pass++ { // the second pass reads the cached pieces
			b := store.Build(q, now)
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(&b.Response); err != nil {
				t.Fatal(err)
			}
			got, gen, flip := store.EncodeDocument(nil, q, now)
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("query %+v pass %d:\n got %s\nwant %s", q, pass, got, want.Bytes())
			}
			if has := bytes.Contains(got, []byte(`"pods":[{"uid":`)); has != q.Pods {
				t.Fatalf("query %+v: per-pod usage served = %v, want only with pods=true", q, has)
			}
			if gen != b.Gen || !flip.Equal(b.NextFlip) {
				t.Fatalf("query %+v: gen %d flip %v, Build says %d %v", q, gen, flip, b.Gen, b.NextFlip)
			}
		}
	}
	// An empty store encodes like encoding/json too (no berthNodes key).
	empty := NewStore(SourcePrometheus, time.Minute)
	b := empty.Build(Query{}, now)
	var want bytes.Buffer
	_ = json.NewEncoder(&want).Encode(&b.Response)
	if got, _, _ := empty.EncodeDocument(nil, Query{}, now); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("empty store:\n got %s\nwant %s", got, want.Bytes())
	}
}
