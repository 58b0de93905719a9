package loadwatcher

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkWatcher5000Nodes measures the GET /watcher handler (store snapshot + JSON encoding)
// at 5000 fresh nodes, each with the three windows and 30 pod UIDs. Besides ns/op it reports
// p99-ns and bytes/resp from the per-request durations, since the scheduler cares about the tail.
func BenchmarkWatcher5000Nodes(b *testing.B) {
	now := time.Now()
	store := NewStore(SourceAgent, 5*time.Minute)
	for i := 0; i < 5000; i++ {
		r := Report{Node: fmt.Sprintf("node-%04d", i), Time: now.Unix(), Latest: Latest{CPU: float64(i % 100), Memory: 40},
			Windows: []WindowReport{
				{Window: "5m", Samples: 300, CPU: ResourceStats{Avg: 12.5, Std: 3.25, P95: 20}, Memory: ResourceStats{Avg: 40, Std: 1, P95: 41}},
				{Window: "10m", Samples: 600, CPU: ResourceStats{Avg: 13.5, Std: 3.5, P95: 21}, Memory: ResourceStats{Avg: 40, Std: 1, P95: 41}},
				{Window: "15m", Samples: 900, CPU: ResourceStats{Avg: 14.5, Std: 3.75, P95: 22}, Memory: ResourceStats{Avg: 40, Std: 1, P95: 41}},
			}}
		for j := 0; j < 30; j++ {
			r.PodUIDs = append(r.PodUIDs, fmt.Sprintf("0b7c1c1e-8f5e-4c5a-9c57-%012d", i*100+j))
		}
		store.Put(r.Node, NodeLoad{Updated: now, Metrics: MetricsFromReport(&r), PodUIDs: r.PodUIDs})
		store.SetKnown(r.Node, true)
	}
	h := NewServer(store).Handler()
	for _, path := range []string{"/watcher", "/watcher?pods=true", "/watcher/node-2500"} {
		b.Run(path, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			durs := make([]time.Duration, 0, b.N)
			var size int
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, req)
				durs = append(durs, time.Since(start))
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
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
