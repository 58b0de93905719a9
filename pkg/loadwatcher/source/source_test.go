package source

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/berth-sched/berth/pkg/loadwatcher"
)

// value reads one number of a window by upstream type and operator; ok says the source
// measured it.
func value(wl loadwatcher.WindowLoad, typ, op string) (float64, bool) {
	u := wl.CPU
	if typ == watcher.Memory {
		u = wl.Memory
	}
	switch op {
	case watcher.Latest:
		return u.Latest, u.Has&loadwatcher.HasLatest != 0
	case watcher.Average:
		return u.Avg, u.Has&loadwatcher.HasAvg != 0
	case watcher.Std:
		return u.Std, u.Has&loadwatcher.HasStd != 0
	}
	return 0, false
}

// fakeProm speaks the Prometheus HTTP API (/api/v1/query) with per-node series computed from
// the query text, so the test checks which PromQL the source sends as well as how it decodes.
type fakeProm struct {
	mu      sync.Mutex
	queries []string
	// nodes → (cpu, mem) levels; node-2 only has CPU.
	updated map[string]float64
}

var overTime = regexp.MustCompile(`^avg by \(node\) \((avg|stddev)_over_time\((\w+)\[(5m|10m|15m)\]\)\)$`)
var latestQ = regexp.MustCompile(`^avg by \(node\) \((\w+)\)$`)

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	r.ParseForm()
	q := r.Form.Get("query")
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.mu.Unlock()
	type sample struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	var res []sample
	add := func(node string, v float64) {
		res = append(res, sample{Metric: map[string]string{"node": node}, Value: [2]any{1700000000.0, fmt.Sprint(v)}})
	}
	winVal := map[string]float64{"5m": 1, "10m": 2, "15m": 3}
	switch {
	case q == "max by (node) (timestamp(berth_node_cpu_utilisation_percent))":
		for n, ts := range f.updated {
			add(n, ts)
		}
	case overTime.MatchString(q):
		m := overTime.FindStringSubmatch(q)
		base := 10.0
		if m[2] == DefaultMemoryMetric {
			base = 50
		}
		if m[1] == "stddev" {
			base = 1
		}
		add("node-1", base+winVal[m[3]])
		if m[2] == DefaultCPUMetric {
			add("node-2", 200) // out of range: passed on for the server to clamp and count
		}
	case latestQ.MatchString(q):
		add("node-1", 42)
	case q == "garbage(":
	default:
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "bad_data", "error": "unexpected query " + q})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}})
}

func TestPrometheusSource(t *testing.T) {
	fp := &fakeProm{updated: map[string]float64{"node-1": 1699999990.5, "node-2": 1699999000}}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	p, err := NewPrometheus(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	loads, err := p.Poll(context.Background(), time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	n1 := loads["node-1"]
	if n1.Updated.Unix() != 1699999990 {
		t.Fatalf("node-1 updated %v", n1.Updated)
	}
	for w, off := range map[string]float64{"5m": 1, "10m": 2, "15m": 3} {
		ms := n1.Windows[w]
		checks := []struct {
			typ, op string
			want    float64
		}{{watcher.CPU, watcher.Average, 10 + off}, {watcher.CPU, watcher.Std, 1 + off}, {watcher.CPU, watcher.Latest, 42},
			{watcher.Memory, watcher.Average, 50 + off}, {watcher.Memory, watcher.Std, 1 + off}}
		for _, c := range checks {
			if v, ok := value(ms, c.typ, c.op); !ok || v != c.want {
				t.Errorf("%s %s %s = %v,%v want %v", w, c.typ, c.op, v, ok, c.want)
			}
		}
	}
	if v, ok := value(loads["node-2"].Windows["15m"], watcher.CPU, watcher.Average); !ok || v != 200 {
		t.Fatalf("node-2 CPU AVG 200 %% passed on as %v,%v; the server clamps it (TestPollClampsOutOfRange)", v, ok)
	}
	if len(fp.queries) != 1+2*(1+2*3) {
		t.Fatalf("%d queries: %q", len(fp.queries), fp.queries)
	}

	// A ratio series (kube-prometheus recording rules) is scaled to percent.
	p.Scale = 0.5
	loads, _ = p.Poll(context.Background(), time.Unix(1700000000, 0))
	if v, _ := value(loads["node-1"].Windows["15m"], watcher.CPU, watcher.Average); v != 6.5 {
		t.Fatalf("scaled AVG %v, want 6.5", v)
	}

	// Errors from Prometheus surface as errors (the server keeps the old numbers).
	p.CPUMetric = "unknown_metric"
	if _, err := p.Poll(context.Background(), time.Now()); err == nil || !strings.Contains(err.Error(), "unknown_metric") {
		t.Fatalf("err = %v", err)
	}
}

func TestMetricsServerSource(t *testing.T) {
	cs := metricsfake.NewSimpleClientset()
	now := time.Unix(1700000000, 0)
	cpuUse := "500m"
	var mu sync.Mutex
	// The generated fake tracks NodeMetrics under a resource name its List does not use, so
	// serve the list from a reactor, as the API server would.
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		return true, &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{
			{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Timestamp: metav1.NewTime(now.Add(-10 * time.Second)), Window: metav1.Duration{Duration: 20 * time.Second},
				Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuUse), corev1.ResourceMemory: resource.MustParse("1Gi")}},
			{ObjectMeta: metav1.ObjectMeta{Name: "ghost"}, Timestamp: metav1.NewTime(now),
				Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
		}}, nil
	})
	ms := &MetricsServer{Client: cs, Capacity: func(n string) (int64, int64, bool) {
		if n != "node-1" {
			return 0, 0, false
		}
		return 2000, 4 << 30, true
	}}
	poll := func() map[string]loadwatcher.WindowLoad {
		t.Helper()
		loads, err := ms.Poll(context.Background(), now)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := loads["ghost"]; ok {
			t.Fatal("a node without capacity was served")
		}
		if got := loads["node-1"].Updated; !got.Equal(now.Add(-10 * time.Second)) {
			t.Fatalf("updated %v, want the NodeMetrics timestamp", got)
		}
		return loads["node-1"].Windows
	}
	m := poll()
	if v, _ := value(m["15m"], watcher.CPU, watcher.Latest); v != 25 {
		t.Fatalf("CPU latest %v, want 25", v)
	}
	if v, _ := value(m["15m"], watcher.Memory, watcher.Average); v != 25 {
		t.Fatalf("memory AVG %v, want 25", v)
	}
	// Same metrics-server sample polled again: not counted twice.
	poll()
	// A new scrape at 75 % CPU, 30 s later.
	mu.Lock()
	cpuUse = "1500m"
	now = now.Add(30 * time.Second)
	mu.Unlock()
	m = poll()
	if v, _ := value(m["5m"], watcher.CPU, watcher.Average); v != 50 {
		t.Fatalf("CPU AVG over two samples %v, want 50 (duplicate poll must not count)", v)
	}
	if v, _ := value(m["5m"], watcher.CPU, watcher.Std); math.Abs(v-25) > 1e-9 {
		t.Fatalf("CPU STD %v, want 25", v)
	}
	if v, _ := value(m["5m"], watcher.CPU, watcher.Latest); v != 75 {
		t.Fatalf("CPU Latest %v, want 75", v)
	}
}
