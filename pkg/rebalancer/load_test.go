package rebalancer

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"

	"github.com/berth-sched/berth/pkg/loadapi"
)

func doc(ts int64, nodes map[string][]watcher.Metric, status map[string]loadapi.NodeStatus) *loadapi.Response {
	r := &loadapi.Response{Nodes: status}
	r.Timestamp = ts
	r.Data.NodeMetricsMap = map[string]watcher.NodeMetrics{}
	for n, ms := range nodes {
		r.Data.NodeMetricsMap[n] = watcher.NodeMetrics{Metrics: ms}
	}
	return r
}

func TestParse(t *testing.T) {
	now := t0
	cpuL := func(v float64) watcher.Metric {
		return watcher.Metric{Type: watcher.CPU, Operator: watcher.Latest, Value: v}
	}
	cpuA := func(v float64) watcher.Metric {
		return watcher.Metric{Type: watcher.CPU, Operator: watcher.Average, Value: v}
	}
	memA := func(v float64) watcher.Metric {
		return watcher.Metric{Type: watcher.Memory, Operator: watcher.Average, Value: v}
	}
	d := doc(now.Unix()-100, map[string][]watcher.Metric{
		"latest-wins": {cpuA(50), cpuL(90), memA(20)},
		"avg-only":    {cpuA(40)},
		"garbage":     {cpuL(math.Inf(1)), memA(20)},
		"negative":    {cpuL(-3)},
	}, map[string]loadapi.NodeStatus{
		"latest-wins": {Updated: now.Unix() - 10, Pods: []loadapi.PodUsage{{UID: "p1", Latest: loadapi.Latest{CPU: 12}}, {UID: "bad", Latest: loadapi.Latest{CPU: 400}}}},
		"stale":       {Updated: now.Unix() - 500, Stale: true},
	})
	// The watcher's clock is 30 s ahead of ours: its times are rebased.
	l, err := Parse(d, now, now.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := l.Nodes["latest-wins"]
	if n.Usage.CPU != 90 || n.Usage.Memory != 20 || !n.HasCPU || !n.HasMemory || n.Invalid {
		t.Fatalf("latest-wins: %+v", n)
	}
	if got := now.Sub(n.Updated); got != 40*time.Second {
		t.Fatalf("rebased age %s, want 40s", got)
	}
	if _, ok := n.Pods["p1"]; !ok || len(n.Pods) != 1 {
		t.Fatalf("pods %+v: want p1 only (the out-of-range one dropped)", n.Pods)
	}
	if a := l.Nodes["avg-only"]; a.Usage.CPU != 40 || a.HasMemory {
		t.Fatalf("avg-only: %+v", a)
	}
	if !l.Nodes["garbage"].Invalid || !l.Nodes["negative"].Invalid || l.InvalidValues != 3 {
		t.Fatalf("invalid values: garbage %+v negative %+v count %d", l.Nodes["garbage"], l.Nodes["negative"], l.InvalidValues)
	}
	if !l.Nodes["stale"].Stale || l.Nodes["stale"].HasMetrics {
		t.Fatalf("stale: %+v", l.Nodes["stale"])
	}
	if want := n.Updated; !l.Newest.Equal(want) {
		t.Fatalf("newest %s, want %s", l.Newest, want)
	}
	if _, err := Parse(&loadapi.Response{}, now, time.Time{}); err == nil {
		t.Fatal("an empty document was accepted")
	}
}

func TestFetchGarbage(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		code       int
		kind       string
	}{
		{"not json", "<html>oops</html>", 200, "decode"},
		{"empty object", "{}", 200, "empty"},
		{"server error", "no window yet", 500, "http_status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != loadapi.ReportPath || r.URL.Query().Get(loadapi.PodsQuery) != "true" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.code)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			_, err := Fetch(context.Background(), srv.Client(), srv.URL, time.Now)
			var fe *FetchError
			if !errors.As(err, &fe) || fe.Kind != tc.kind {
				t.Fatalf("got %v, want a %s FetchError", err, tc.kind)
			}
		})
	}
}
