package loadapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/paypal/load-watcher/pkg/watcher"
	lwapi "github.com/paypal/load-watcher/pkg/watcher/api"
)

func sampleResponse() Response {
	var r Response
	r.Timestamp = 1_700_000_000
	r.Source = "BerthAgent"
	r.Window = watcher.Window{Duration: "15m", Start: 1_700_000_000 - 900, End: 1_700_000_000}
	r.Data.NodeMetricsMap = watcher.NodeMetricsMap{
		"node-a": {Metrics: []watcher.Metric{
			{Name: "berth_node_cpu_utilisation", Type: watcher.CPU, Operator: watcher.Latest, Value: 31},
			{Name: "berth_node_cpu_utilisation", Type: watcher.CPU, Operator: watcher.Average, Rollup: "15m", Value: 30},
			{Name: "berth_node_memory_utilisation", Type: watcher.Memory, Operator: watcher.Average, Rollup: "15m", Value: 49.5},
		}},
	}
	r.Nodes = map[string]NodeStatus{
		"node-a": {Updated: 1_699_999_998, PodUIDs: []string{"uid-1", "uid-2"}, Pods: []PodUsage{{UID: "uid-1", Latest: Latest{CPU: 3}}}},
		"node-b": {Stale: true},
	}
	return r
}

// The contract is JSON: what one side encodes the other must decode to the same value, with the
// field names both sides (and the docs) rely on.
func TestRoundTrip(t *testing.T) {
	rep := Report{Node: "node-a", Time: 1_700_000_000, Latest: Latest{CPU: 12.5, Memory: 40},
		Windows: []WindowReport{{Window: "5m", Samples: 300, CPU: ResourceStats{Avg: 10, Std: 2, P95: 15}, Memory: ResourceStats{Avg: 40, Std: 1, P95: 41}}},
		PodUIDs: []string{"uid-1"}, Instance: "3f9a0c2e71b84d5a", Seq: 42,
		Pods: []PodUsage{{UID: "uid-1", Latest: Latest{CPU: 3, Memory: 2}, Windows: []PodWindow{{Window: "5m", CPU: 1.5, Memory: 2}}, CPUMillicores: 240, MemoryBytes: 1 << 30}}}
	tests := []struct {
		name   string
		in     any
		out    any
		fields []string
	}{
		{"report", &rep, &Report{}, []string{`"node":`, `"time":`, `"latest":`, `"windows":`, `"podUIDs":`, `"samples":`, `"p95":`, `"instance":`, `"seq":`, `"pods":`, `"uid":`, `"cpuMillicores":`, `"memoryBytes":`}},
		{"response", ptr(sampleResponse()), &Response{}, []string{`"timestamp":`, `"window":`, `"source":`, `"data":`, `"NodeMetricsMap":`, `"berthNodes":`, `"updated":`, `"stale":true`, `"podUIDs":`}},
		{"typed load", ptr(sampleLoad()), &Load{}, []string{`"timestamp":`, `"window":"15m"`, `"source":`, `"nodes":`, `"updated":`, `"stale":true`, `"cpu":{"avg":30,"std":2}`, `"memory":{"avg":49.5,"std":0}`, `"podUIDs":`, `"pods":`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.fields {
				if !strings.Contains(string(b), f) {
					t.Errorf("encoding lacks %s: %s", f, b)
				}
			}
			if err := json.Unmarshal(b, tc.out); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tc.in, tc.out) {
				t.Fatalf("round trip changed the value:\n in  %+v\n out %+v", tc.in, tc.out)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func sampleLoad() Load {
	return Load{Timestamp: 1_700_000_000, Window: "15m", Source: "BerthAgent", Nodes: map[string]NodeLoad{
		"node-a": {Updated: 1_699_999_998, CPU: &ResourceLoad{Avg: 30, Std: 2}, Memory: &ResourceLoad{Avg: 49.5},
			PodUIDs: []string{"uid-1"}, Pods: []PodUsage{{UID: "uid-1", Latest: Latest{CPU: 3}}}},
		"node-b": {Stale: true},
	}}
}

// A stale node carries no numbers: the typed form must not encode an absent resource as 0 %,
// which a reader would take for an idle node.
func TestLoadOmitsAbsentResources(t *testing.T) {
	b, err := json.Marshal(NodeLoad{Stale: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"updated":0,"stale":true}`; got != want {
		t.Fatalf("stale node encoded as %s, want %s", got, want)
	}
}

// paypal/load-watcher v0.2.4's own client must decode Berth's document unchanged: the upstream
// fields at the top level, Berth's extension ignored.
func TestPaypalClientDecodesResponse(t *testing.T) {
	want := sampleResponse()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ReportPath {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&want)
	}))
	defer srv.Close()
	client, err := lwapi.NewServiceClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.GetLatestWatcherMetrics()
	if err != nil {
		t.Fatalf("paypal client: %v", err)
	}
	if !reflect.DeepEqual(*got, want.WatcherMetrics) {
		t.Fatalf("paypal client read\n %+v\nwant\n %+v", *got, want.WatcherMetrics)
	}
	// And Berth's reader of an upstream document (no berthNodes) gets the upstream part intact.
	b, _ := json.Marshal(&want.WatcherMetrics)
	var r Response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Nodes != nil || !reflect.DeepEqual(r.WatcherMetrics, want.WatcherMetrics) {
		t.Fatalf("upstream document decoded as %+v", r)
	}
}
