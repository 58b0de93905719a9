package loadwatcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	lwapi "github.com/paypal/load-watcher/pkg/watcher/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/kubernetes/fake"
)

type testEnv struct {
	srv  *Server
	http *httptest.Server
	now  time.Time
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	cs := fake.NewClientset()
	fakeReviews(cs, map[string]tokenUser{
		"tok-a": agentUser("berth-system:berth-agent", "agent-a", "uid-a", "node-a"),
		"tok-b": agentUser("berth-system:berth-agent", "agent-b", "uid-b", "node-b"),
		"tok-x": agentUser("berth-system:berth-agent", "agent-x", "uid-x", "node-x"),
	}, nil)
	auth, err := NewAuthenticator(cs, []string{"berth-system/berth-agent"}, nil, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{now: time.Now()}
	store := NewStore(SourceAgent, 5*time.Minute)
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		store.SetKnown(n, true)
	}
	e.srv = NewServer(store)
	e.srv.SetClock(func() time.Time { return e.now })
	e.srv.Auth = auth
	e.srv.NodeExists = func(n string) bool { return n == "node-a" || n == "node-b" || n == "node-c" }
	e.http = httptest.NewServer(e.srv.Handler())
	t.Cleanup(e.http.Close)
	return e
}

func (e *testEnv) post(t *testing.T, token string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.http.URL+ReportPath, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// seqReport is reportFor with an agent run and sequence number.
func seqReport(node string, t time.Time, cpuAvg float64, instance string, seq uint64) []byte {
	var r Report
	_ = json.Unmarshal(reportFor(node, t, cpuAvg), &r)
	r.Instance, r.Seq = instance, seq
	b, _ := json.Marshal(r)
	return b
}

func reportFor(node string, t time.Time, cpuAvg float64) []byte {
	r := Report{Node: node, Time: t.Unix(), Latest: Latest{CPU: cpuAvg + 1, Memory: 50},
		Windows: []WindowReport{
			{Window: "5m", Samples: 300, CPU: ResourceStats{Avg: cpuAvg + 2, Std: 3, P95: 90}, Memory: ResourceStats{Avg: 50, Std: 1, P95: 52}},
			{Window: "15m", Samples: 900, CPU: ResourceStats{Avg: cpuAvg, Std: 7, P95: 80}, Memory: ResourceStats{Avg: 49, Std: 2, P95: 55}},
		},
		PodUIDs: []string{"pod-1", "pod-2"}}
	b, _ := json.Marshal(r)
	return b
}

// metricValue finds one operator's value of a type in a node's metrics.
func metricValue(ms []watcher.Metric, typ, op string) (float64, bool) {
	for _, m := range ms {
		if m.Type == typ && m.Operator == op {
			return m.Value, true
		}
	}
	return 0, false
}

func TestWatcherDecodedByPaypalClient(t *testing.T) {
	e := newTestEnv(t)
	if code, body := e.post(t, "tok-a", reportFor("node-a", e.now.Add(-2*time.Second), 30)); code != http.StatusNoContent {
		t.Fatalf("report refused: %d %s", code, body)
	}
	// A report already older than the staleness limit on arrival must not be stored as fresh.
	if code, body := e.post(t, "tok-b", reportFor("node-b", e.now.Add(-9*time.Minute), 70)); code != http.StatusBadRequest || !strings.HasPrefix(body, ReasonBadTime) {
		t.Fatalf("9-minute-old report: %d %s, want 400 %s", code, body, ReasonBadTime)
	}
	if e.srv.Store.Len() != 1 {
		t.Fatalf("store has %d nodes, want only node-a", e.srv.Store.Len())
	}
	client, _ := lwapi.NewServiceClient(e.http.URL)
	m, err := client.GetLatestWatcherMetrics()
	if err != nil {
		t.Fatalf("paypal client: %v", err)
	}
	if m.Source != SourceAgent || m.Window.Duration != "15m" || m.Window.End != e.now.Unix() || m.Window.End-m.Window.Start != 900 {
		t.Fatalf("envelope %+v", m)
	}
	na, ok := m.Data.NodeMetricsMap["node-a"]
	if !ok || len(m.Data.NodeMetricsMap) != 1 {
		t.Fatalf("NodeMetricsMap %+v, want only node-a", m.Data.NodeMetricsMap)
	}
	for _, c := range []struct {
		typ, op string
		want    float64
	}{{watcher.CPU, watcher.Average, 30}, {watcher.CPU, watcher.Std, 7}, {watcher.CPU, watcher.Latest, 31},
		{watcher.Memory, watcher.Average, 49}, {watcher.Memory, watcher.Std, 2}, {watcher.Memory, watcher.Latest, 50}} {
		if v, ok := metricValue(na.Metrics, c.typ, c.op); !ok || v != c.want {
			t.Errorf("%s %s = %v (found %v), want %v", c.typ, c.op, v, ok, c.want)
		}
	}
	// Upstream TargetLoadPacking reads the last CPU metric with AVG or Latest: it must be the AVG.
	var tlp float64
	for _, x := range na.Metrics {
		if x.Type == watcher.CPU && (x.Operator == watcher.Average || x.Operator == watcher.Latest) {
			tlp = x.Value
		}
	}
	if tlp != 30 {
		t.Fatalf("TargetLoadPacking would read %v, want the 15m average 30", tlp)
	}

	// Berth's extension: freshness per node, pods only on request, missing nodes listed.
	var resp Response
	getJSON(t, e.http.URL+"/watcher?pods=true&window=5m", &resp)
	if resp.Window.Duration != "5m" {
		t.Fatalf("window %+v", resp.Window)
	}
	if v, _ := metricValue(resp.Data.NodeMetricsMap["node-a"].Metrics, watcher.CPU, watcher.Average); v != 32 {
		t.Fatalf("5m CPU AVG %v, want 32", v)
	}
	st := resp.Nodes["node-a"]
	if st.Stale || st.Updated != e.now.Add(-2*time.Second).Unix() || len(st.PodUIDs) != 2 {
		t.Fatalf("node-a status %+v", st)
	}
	for _, n := range []string{"node-b", "node-c"} {
		if s, ok := resp.Nodes[n]; !ok || !s.Stale || s.Updated != 0 {
			t.Fatalf("%s (never reported) = %+v %v, want listed as stale with no time", n, s, ok)
		}
	}
	getJSON(t, e.http.URL+"/watcher", &resp)
	if len(resp.Nodes["node-a"].PodUIDs) != 0 {
		t.Fatal("pod UIDs served without ?pods=true")
	}
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func TestStaleNodesAreNotServedAsLoad(t *testing.T) {
	e := newTestEnv(t)
	reported := e.now
	if code, body := e.post(t, "tok-a", reportFor("node-a", reported, 60)); code != http.StatusNoContent {
		t.Fatalf("%d %s", code, body)
	}
	e.now = reported.Add(5*time.Minute + time.Second)
	client, _ := lwapi.NewServiceClient(e.http.URL)
	m, err := client.GetLatestWatcherMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Data.NodeMetricsMap["node-a"]; ok {
		t.Fatalf("stale node-a still in NodeMetricsMap: %+v", m.Data.NodeMetricsMap)
	}
	var resp Response
	getJSON(t, e.http.URL+"/watcher/node-a", &resp)
	if s := resp.Nodes["node-a"]; !s.Stale || s.Updated != reported.Unix() {
		t.Fatalf("node-a status %+v, want stale with its last time", s)
	}
	if len(resp.Data.NodeMetricsMap) != 0 {
		t.Fatalf("per-node form served stale metrics %+v", resp.Data.NodeMetricsMap)
	}
	// A fresh report makes it fresh again.
	if code, _ := e.post(t, "tok-a", reportFor("node-a", e.now, 10)); code != http.StatusNoContent {
		t.Fatal("fresh report refused")
	}
	getJSON(t, e.http.URL+"/watcher/node-a", &resp)
	if v, _ := metricValue(resp.Data.NodeMetricsMap["node-a"].Metrics, watcher.CPU, watcher.Average); v != 10 || resp.Nodes["node-a"].Stale {
		t.Fatalf("after a fresh report: %+v %+v", resp.Data.NodeMetricsMap, resp.Nodes)
	}
	if code := getJSON(t, e.http.URL+"/watcher/no-such-node", &resp); code != http.StatusNotFound {
		t.Fatalf("unknown node: %d, want 404", code)
	}
	if code := getJSON(t, e.http.URL+"/watcher?host=node-a", &resp); code != http.StatusOK || len(resp.Nodes) != 1 {
		t.Fatalf("?host= form: %d %+v", code, resp.Nodes)
	}
	if code := getJSON(t, e.http.URL+"/watcher?window=1h", &resp); code != http.StatusBadRequest {
		t.Fatalf("window=1h: %d, want 400", code)
	}
}

func TestBadReportsAreRefusedAndCounted(t *testing.T) {
	e := newTestEnv(t)
	good := reportFor("node-a", e.now, 20)
	var tooManyPods Report
	json.Unmarshal(good, &tooManyPods)
	for i := 0; i <= DefaultMaxPodUIDs; i++ {
		tooManyPods.PodUIDs = append(tooManyPods.PodUIDs, fmt.Sprintf("p%d", i))
	}
	tmp, _ := json.Marshal(tooManyPods)
	huge := append([]byte(`{"node":"node-a","podUIDs":["`), bytes.Repeat([]byte("x"), MaxReportBytes)...)
	huge = append(huge, `"]}`...)
	tests := []struct {
		name   string
		token  string
		body   []byte
		status int
		reason string
	}{
		{"no token", "", good, 401, ReasonNoToken},
		{"forged token", "forged", good, 401, ReasonInvalidToken},
		{"other node's identity", "tok-b", good, 403, ReasonWrongNode},
		{"garbage", "tok-a", []byte("\x00\xffnot json"), 400, ReasonBadJSON},
		{"unknown field", "tok-a", []byte(`{"node":"node-a","evil":1}`), 400, ReasonBadJSON},
		{"trailing data", "tok-a", append(append([]byte{}, good...), []byte(`{}`)...), 400, ReasonBadJSON},
		{"NaN literal", "tok-a", bytes.Replace(good, []byte(`"cpu":21`), []byte(`"cpu":NaN`), 1), 400, ReasonBadJSON},
		{"oversized", "tok-a", huge, 413, ReasonTooLarge},
		{"over 100", "tok-a", bytes.Replace(good, []byte(`"cpu":21`), []byte(`"cpu":101`), 1), 400, ReasonBadValue},
		{"negative", "tok-a", bytes.Replace(good, []byte(`"memory":50`), []byte(`"memory":-3`), 1), 400, ReasonBadValue},
		{"too many pods", "tok-a", tmp, 400, ReasonTooManyPods},
		{"node not in cluster", "tok-x", reportFor("node-x", e.now, 20), 400, ReasonUnknownNode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := testutil.ToFloat64(e.srv.Rejected().WithLabelValues(tc.reason))
			code, body := e.post(t, tc.token, tc.body)
			if code != tc.status || !strings.HasPrefix(body, tc.reason) {
				t.Fatalf("got %d %q, want %d %s", code, body, tc.status, tc.reason)
			}
			if after := testutil.ToFloat64(e.srv.Rejected().WithLabelValues(tc.reason)); after != before+1 {
				t.Fatalf("counter %s went %v → %v", tc.reason, before, after)
			}
		})
	}
	if e.srv.Store.Len() != 0 {
		t.Fatal("a refused report was stored")
	}
	// The server keeps serving after all that.
	if code, body := e.post(t, "tok-a", good); code != http.StatusNoContent {
		t.Fatalf("good report after bad ones: %d %s", code, body)
	}
	// A late retry of an earlier report of the same agent run is ignored, not stored over the
	// newer one.
	if code, _ := e.post(t, "tok-a", seqReport("node-a", e.now, 20, "run-1", 2)); code != http.StatusNoContent {
		t.Fatal("report refused")
	}
	if code, _ := e.post(t, "tok-a", seqReport("node-a", e.now, 90, "run-1", 1)); code != http.StatusNoContent {
		t.Fatal("older report not acknowledged")
	}
	if l, _ := e.srv.Store.Get("node-a"); l.Seq != 2 {
		t.Fatalf("older report replaced the newer one: seq %d", l.Seq)
	}
	if testutil.ToFloat64(e.srv.Rejected().WithLabelValues(ReasonOutOfOrder)) != 1 {
		t.Fatal("out-of-order report not counted")
	}
	resp, _ := http.Get(e.http.URL + "/metrics")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `berth_loadwatcher_reports_rejected_total{reason="bad_json"} 4`) ||
		!strings.Contains(string(b), "berth_loadwatcher_nodes_missing 2") {
		t.Fatalf("/metrics:\n%s", b)
	}
}

func TestReportsRefusedWithoutAgentSource(t *testing.T) {
	s := NewServer(NewStore(SourcePrometheus, time.Minute))
	h := s.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, ReportPath, strings.NewReader("{}")))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST with the prometheus source: %d", rec.Code)
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Fatalf("%s = %d", path, rec.Code)
		}
	}
	s.Ready = func() bool { return false }
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz when not ready = %d", rec.Code)
	}
}
