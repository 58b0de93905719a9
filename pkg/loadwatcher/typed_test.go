package loadwatcher

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	lwapi "github.com/paypal/load-watcher/pkg/watcher/api"

	"github.com/berth-sched/berth/pkg/loadapi"
)

const typedAccept = "Accept: " + loadapi.LoadMediaType

func TestAcceptsLoad(t *testing.T) {
	tests := []struct {
		header string
		want   bool
	}{
		{"", false},
		{"application/json", false},
		{"*/*", false}, // a wildcard keeps upstream clients (curl) on the upstream document
		{loadapi.LoadMediaType, true},
		{loadapi.LoadMediaType + ", application/json;q=0.9", true},
		{"application/json, " + loadapi.LoadMediaType + ";q=0.5", true},
		{loadapi.LoadMediaType + ";q=0", false},
		{"application/vnd.berth.load.v2+json", false},
	}
	for _, tc := range tests {
		if got := acceptsLoad(tc.header); got != tc.want {
			t.Errorf("acceptsLoad(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

// Berth's scheduler asks for the typed form and gets every node's numbers as named fields; the
// same store still serves upstream clients the upstream document, byte for byte as before, and
// neither form's cached copy is served for the other.
func TestTypedFormAndUpstreamDocument(t *testing.T) {
	e := newTestEnv(t)
	updated := e.now.Add(-2 * time.Second)
	if code, body := e.post(t, "tok-a", reportFor("node-a", updated, 30)); code != http.StatusNoContent {
		t.Fatalf("report refused: %d %s", code, body)
	}
	h := e.srv.Handler()
	upstreamBefore := get(t, h, "/watcher?pods=true", nil)

	tests := []struct {
		name  string
		path  string
		check func(t *testing.T, l loadapi.Load)
	}{
		{"15m with pods", "/watcher?pods=true", func(t *testing.T, l loadapi.Load) {
			want := loadapi.NodeLoad{Updated: updated.Unix(), CPU: &loadapi.ResourceLoad{Avg: 30, Std: 7}, Memory: &loadapi.ResourceLoad{Avg: 49, Std: 2},
				PodUIDs: []string{"uid-a1", "uid-a2"}}
			got := l.Nodes["node-a"]
			got.PodUIDs = append([]string(nil), got.PodUIDs...)
			if l.Window != "15m" || l.Source != SourceAgent || l.Timestamp != e.now.Unix() {
				t.Errorf("envelope %+v", l)
			}
			if len(got.PodUIDs) != 2 {
				t.Errorf("pod UIDs %v, want the report's 2", got.PodUIDs)
			}
			want.PodUIDs = got.PodUIDs
			if !reflect.DeepEqual(got, want) {
				t.Errorf("node-a %+v\nwant %+v", got, want)
			}
			for _, n := range []string{"node-b", "node-c"} {
				if nl, ok := l.Nodes[n]; !ok || !reflect.DeepEqual(nl, loadapi.NodeLoad{Stale: true}) {
					t.Errorf("%s (never reported) = %+v %v, want stale with no numbers", n, nl, ok)
				}
			}
		}},
		{"5m without pods", "/watcher?window=5m", func(t *testing.T, l loadapi.Load) {
			got := l.Nodes["node-a"]
			if l.Window != "5m" || *got.CPU != (loadapi.ResourceLoad{Avg: 32, Std: 3}) || got.PodUIDs != nil || got.Pods != nil {
				t.Errorf("5m: window %s, node-a %+v (cpu %+v)", l.Window, got, got.CPU)
			}
		}},
		{"one node", "/watcher/node-a", func(t *testing.T, l loadapi.Load) {
			if len(l.Nodes) != 1 || l.Nodes["node-a"].CPU == nil || l.Nodes["node-a"].CPU.Avg != 30 {
				t.Errorf("one node: %+v", l.Nodes)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, e.http.URL+tc.path, nil)
			req.Header.Set("Accept", loadapi.LoadMediaType+", application/json;q=0.9")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != loadapi.LoadMediaType {
				t.Fatalf("status %d, Content-Type %q, want 200 %s", resp.StatusCode, resp.Header.Get("Content-Type"), loadapi.LoadMediaType)
			}
			if v := resp.Header.Get("Vary"); v != "Accept, Accept-Encoding" {
				t.Errorf("Vary %q: a cache between would serve one form for the other", v)
			}
			var l loadapi.Load
			dec := json.NewDecoder(resp.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&l); err != nil {
				t.Fatalf("typed form does not decode strictly: %v", err)
			}
			tc.check(t, l)
		})
	}

	typed := get(t, h, "/watcher?pods=true", map[string]string{"Accept": loadapi.LoadMediaType})
	upstreamAfter := get(t, h, "/watcher?pods=true", nil)
	if string(upstreamAfter.body) != string(upstreamBefore.body) || upstreamAfter.etag != upstreamBefore.etag {
		t.Errorf("the upstream document changed after a typed read:\n%s\n%s", upstreamBefore.body, upstreamAfter.body)
	}
	if typed.etag == upstreamAfter.etag {
		t.Error("both forms carry one ETag: a client could get a 304 for the form it does not hold")
	}
	if a := get(t, h, "/watcher?pods=true", map[string]string{"Accept": loadapi.LoadMediaType, "If-None-Match": typed.etag}); a.code != http.StatusNotModified {
		t.Errorf("typed form with its ETag: %d, want 304", a.code)
	}
	// Upstream's own client still decodes what a client that does not ask gets.
	client, _ := lwapi.NewServiceClient(e.http.URL)
	m, err := client.GetLatestWatcherMetrics()
	if err != nil || len(m.Data.NodeMetricsMap["node-a"].Metrics) != 6 {
		t.Fatalf("paypal client after typed reads: %v %+v", err, m)
	}
}

// The store keeps typed numbers and writes upstream's metric list only when serving it: the
// list must be what upstream clients were served before (names per source, Latest then AVG
// then STD per resource, rollup on AVG and STD only, nothing for what a source did not measure).
func TestUpstreamListFromTypedNumbers(t *testing.T) {
	const all = HasLatest | HasAvg | HasStd
	m := func(name, typ, op, rollup string, v float64) watcher.Metric {
		return watcher.Metric{Name: name, Type: typ, Operator: op, Rollup: rollup, Value: v}
	}
	const agentCPU, agentMem = "berth_node_cpu_utilisation", "berth_node_memory_utilisation"
	tests := []struct {
		name   string
		source string
		names  []string // SetMetricNames, when set
		wl     WindowLoad
		want   []watcher.Metric
		// typed is the node's CPU and memory in Berth's form (nil: absent).
		typedCPU, typedMem *loadapi.ResourceLoad
	}{
		{"agent report", SourceAgent, nil,
			WindowsFromReport(&Report{Latest: Latest{CPU: 31, Memory: 50}, Windows: []WindowReport{{Window: "15m", CPU: ResourceStats{Avg: 30, Std: 7, P95: 80}, Memory: ResourceStats{Avg: 49, Std: 2}}}})["15m"],
			[]watcher.Metric{m(agentCPU, watcher.CPU, watcher.Latest, "", 31), m(agentCPU, watcher.CPU, watcher.Average, "15m", 30), m(agentCPU, watcher.CPU, watcher.Std, "15m", 7),
				m(agentMem, watcher.Memory, watcher.Latest, "", 50), m(agentMem, watcher.Memory, watcher.Average, "15m", 49), m(agentMem, watcher.Memory, watcher.Std, "15m", 2)},
			&loadapi.ResourceLoad{Avg: 30, Std: 7}, &loadapi.ResourceLoad{Avg: 49, Std: 2}},
		{"metrics-server before a window holds a sample", SourceMetricsServer, nil,
			WindowLoad{CPU: Usage{Latest: 25, Has: HasLatest}, Memory: Usage{Latest: 40, Avg: 41, Std: 1, Has: all}},
			[]watcher.Metric{m("metrics.k8s.io/cpu", watcher.CPU, watcher.Latest, "", 25),
				m("metrics.k8s.io/memory", watcher.Memory, watcher.Latest, "", 40), m("metrics.k8s.io/memory", watcher.Memory, watcher.Average, "15m", 41), m("metrics.k8s.io/memory", watcher.Memory, watcher.Std, "15m", 1)},
			&loadapi.ResourceLoad{Avg: 25}, &loadapi.ResourceLoad{Avg: 41, Std: 1}},
		{"prometheus with its configured series, no instant value", SourcePrometheus, []string{"instance:node_cpu:ratio", "instance:node_memory:ratio"},
			WindowLoad{CPU: Usage{Avg: 12, Std: 3, Has: HasAvg | HasStd}},
			[]watcher.Metric{m("instance:node_cpu:ratio", watcher.CPU, watcher.Average, "15m", 12), m("instance:node_cpu:ratio", watcher.CPU, watcher.Std, "15m", 3)},
			&loadapi.ResourceLoad{Avg: 12, Std: 3}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			s := NewStore(tc.source, time.Minute)
			if tc.names != nil {
				s.SetMetricNames(tc.names[0], tc.names[1])
			}
			s.Put("n", NodeLoad{Updated: now, Windows: map[string]WindowLoad{"15m": tc.wl}})
			got := s.Build(Query{}, now).Data.NodeMetricsMap["n"].Metrics
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("served\n %+v\nwant\n %+v", got, tc.want)
			}
			// The cached encoder writes the same list.
			var doc loadapi.Response
			body, _, _ := s.EncodeDocument(nil, Query{}, now)
			if err := json.Unmarshal(body, &doc); err != nil || !reflect.DeepEqual(doc.Data.NodeMetricsMap["n"].Metrics, tc.want) {
				t.Errorf("encoded %s (%v)", body, err)
			}
			typed := s.BuildLoad(Query{}, now).Nodes["n"]
			if !reflect.DeepEqual(typed.CPU, tc.typedCPU) || !reflect.DeepEqual(typed.Memory, tc.typedMem) {
				t.Errorf("typed cpu %+v memory %+v, want %+v %+v", typed.CPU, typed.Memory, tc.typedCPU, tc.typedMem)
			}
		})
	}
}

// The typed document assembled from per-node pieces is byte for byte what encoding/json writes
// for BuildLoad's Load, in every variant, with fresh, stale, never-reported and partly measured
// nodes, before and after the pieces are cached.
func TestEncodeLoadMatchesEncodingJSON(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	store := NewStore(SourceMetricsServer, 5*time.Minute)
	for i, age := range []time.Duration{0, 4 * time.Minute, 6 * time.Minute, time.Second} {
		r := benchReport(i, now.Add(-age))
		l := NodeLoad{Updated: now.Add(-age), Windows: WindowsFromReport(&r), PodUIDs: r.PodUIDs}
		switch i {
		case 0:
			l.Pods = []loadapi.PodUsage{{UID: r.PodUIDs[0], Latest: Latest{CPU: 1.5, Memory: 2},
				Windows: []loadapi.PodWindow{{Window: "15m", CPU: 0.25, Memory: 2}}, CPUMillicores: 60, MemoryBytes: 1 << 20}}
		case 3:
			// No pods, an escaped name, CPU with only a latest sample and no memory at all.
			r.Node, l.PodUIDs = `node-<&>"`, nil
			l.Windows = map[string]WindowLoad{"15m": {CPU: Usage{Latest: 7, Has: HasLatest}}}
		}
		store.Put(r.Node, l)
	}
	store.SetKnown("never-reported", true)
	for _, q := range []Query{{Typed: true}, {Typed: true, Pods: true}, {Typed: true, Window: "5m"}, {Typed: true, Window: "10m", Pods: true}} {
		for pass := 0; pass < 2; pass++ { // the second pass reads the cached pieces
			b := store.BuildLoad(q, now)
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(&b.Load); err != nil {
				t.Fatal(err)
			}
			got, gen, flip := store.EncodeLoad(nil, q, now)
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("query %+v pass %d:\n got %s\nwant %s", q, pass, got, want.Bytes())
			}
			if gen != b.Gen || !flip.Equal(b.NextFlip) {
				t.Fatalf("query %+v: gen %d flip %v, BuildLoad says %d %v", q, gen, flip, b.Gen, b.NextFlip)
			}
		}
	}
	empty := NewStore(SourceAgent, time.Minute)
	b := empty.BuildLoad(Query{Typed: true}, now)
	var want bytes.Buffer
	_ = json.NewEncoder(&want).Encode(&b.Load)
	if got, _, _ := empty.EncodeLoad(nil, Query{Typed: true}, now); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("empty store:\n got %s\nwant %s", got, want.Bytes())
	}
}
