package loadwatcher

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/loadapi"
)

func benchReport(i int, now time.Time) Report {
	r := Report{Node: fmt.Sprintf("node-%04d", i), Time: now.Unix(), Latest: Latest{CPU: float64(i % 100), Memory: 40},
		Windows: []WindowReport{
			{Window: "5m", Samples: 300, CPU: ResourceStats{Avg: 12.5, Std: 3.25, P95: 20}, Memory: ResourceStats{Avg: 40, Std: 1, P95: 41}},
			{Window: "10m", Samples: 600, CPU: ResourceStats{Avg: 13.5, Std: 3.5, P95: 21}, Memory: ResourceStats{Avg: 40, Std: 1, P95: 41}},
			{Window: "15m", Samples: 900, CPU: ResourceStats{Avg: 14.5, Std: 3.75, P95: 22}, Memory: ResourceStats{Avg: 40, Std: 1, P95: 41}},
		}}
	for j := 0; j < 30; j++ {
		r.PodUIDs = append(r.PodUIDs, fmt.Sprintf("0b7c1c1e-8f5e-4c5a-9c57-%012d", i*100+j))
	}
	return r
}

// BenchmarkWatcher5000Nodes measures the GET /watcher handler at 5000 fresh nodes, each with the
// three windows and 30 pod UIDs. Besides ns/op it reports p99-ns and bytes/resp from the
// per-request durations, since the scheduler cares about the tail. Cases: the plain document
// (served from the encoded cache), with pods, gzip, a poll with the current ETag (304), the
// per-node form, and the worst case where one report lands before every request (each request
// re-encodes); then the typed form (loadapi.Load), cached and re-encoded.
func BenchmarkWatcher5000Nodes(b *testing.B) {
	now := time.Now()
	store := NewStore(SourceAgent, 5*time.Minute)
	for i := 0; i < 5000; i++ {
		r := benchReport(i, now)
		store.Put(r.Node, NodeLoad{Updated: now, Windows: WindowsFromReport(&r), PodUIDs: r.PodUIDs})
		store.SetKnown(r.Node, true)
	}
	srv := NewServer(store)
	h := srv.Handler()
	etag := func(path string) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Header().Get("ETag")
	}
	churn := benchReport(42, now)
	typed := map[string]string{"Accept": loadapi.LoadMediaType}
	cases := []struct {
		name, path string
		hdr        map[string]string
		before     func() // runs untimed before each request
		code       int
	}{
		{"/watcher", "/watcher", nil, nil, http.StatusOK},
		{"/watcher?pods=true", "/watcher?pods=true", nil, nil, http.StatusOK},
		{"/watcher?pods=true gzip", "/watcher?pods=true", map[string]string{"Accept-Encoding": "gzip"}, nil, http.StatusOK},
		{"/watcher?pods=true If-None-Match (304)", "/watcher?pods=true", map[string]string{"If-None-Match": etag("/watcher?pods=true")}, nil, http.StatusNotModified},
		{"/watcher/node-2500", "/watcher/node-2500", nil, nil, http.StatusOK},
		{"/watcher?pods=true after a report (re-encode)", "/watcher?pods=true", nil, func() {
			store.Put(churn.Node, NodeLoad{Updated: now, Windows: WindowsFromReport(&churn), PodUIDs: churn.PodUIDs})
		}, http.StatusOK},
		// Berth's typed form, which Berth's schedulers ask for.
		{"/watcher?pods=true typed", "/watcher?pods=true", typed, nil, http.StatusOK},
		{"/watcher?pods=true typed after a report (re-encode)", "/watcher?pods=true", typed, func() {
			store.Put(churn.Node, NodeLoad{Updated: now, Windows: WindowsFromReport(&churn), PodUIDs: churn.PodUIDs})
		}, http.StatusOK},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			// Untimed warm-up: the first request of a variant encodes it, which the re-encode
			// case measures on its own.
			h.ServeHTTP(httptest.NewRecorder(), req)
			durs := make([]time.Duration, 0, b.N)
			var size int
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if tc.before != nil {
					b.StopTimer()
					tc.before()
					b.StartTimer()
				}
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, req)
				durs = append(durs, time.Since(start))
				if rec.Code != tc.code {
					b.Fatalf("status %d, want %d", rec.Code, tc.code)
				}
				size = rec.Body.Len()
			}
			b.StopTimer()
			slices.Sort(durs)
			b.ReportMetric(float64(durs[(len(durs)*99+99)/100-1].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(size), "bytes/resp")
		})
	}
}
