package loadwatcher

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Reports are ordered by arrival and, within one agent run, by sequence number; the agent's
// clock only says how old the numbers are, clamped so they are never newer than now.
func TestReportOrderIgnoresAgentClock(t *testing.T) {
	type post struct {
		ahead    time.Duration // report time minus the watcher's now
		cpu      float64
		instance string
		seq      uint64
	}
	tests := []struct {
		name    string
		posts   []post
		wantCPU float64 // the 15m CPU average served afterwards
		wantSeq uint64
	}{
		{"an honest report after one stamped 50 s ahead wins", []post{{50 * time.Second, 90, "", 0}, {0, 20, "", 0}}, 20, 0},
		{"same with sequence numbers", []post{{50 * time.Second, 90, "run-1", 1}, {0, 20, "run-1", 2}}, 20, 2},
		{"a clock stepped back 2 min does not freeze the node", []post{{0, 90, "run-1", 1}, {-2 * time.Minute, 20, "run-1", 2}}, 20, 2},
		{"a late retry of the same run is ignored", []post{{0, 90, "run-1", 5}, {0, 20, "run-1", 3}}, 90, 5},
		{"a repeated seq is ignored", []post{{0, 90, "run-1", 5}, {0, 20, "run-1", 5}}, 90, 5},
		{"a restarted agent (new run) starts again at 1", []post{{0, 90, "run-1", 5}, {0, 20, "run-2", 1}}, 20, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			e.now = time.Unix(e.now.Unix(), 0)
			for _, p := range tc.posts {
				if code, body := e.post(t, "tok-a", seqReport("node-a", e.now.Add(p.ahead), p.cpu, p.instance, p.seq)); code != http.StatusNoContent {
					t.Fatalf("report %+v: %d %s", p, code, body)
				}
			}
			l, _ := e.srv.Store.Get("node-a")
			if l.Updated.After(e.now) {
				t.Fatalf("stored sample time %v is ahead of the watcher's now %v", l.Updated, e.now)
			}
			var resp Response
			getJSON(t, e.http.URL+"/watcher", &resp)
			if v, _ := metricValue(resp.Data.NodeMetricsMap["node-a"].Metrics, watcher.CPU, watcher.Average); v != tc.wantCPU || l.Seq != tc.wantSeq {
				t.Fatalf("served CPU %v seq %d, want %v seq %d", v, l.Seq, tc.wantCPU, tc.wantSeq)
			}
			if u := resp.Nodes["node-a"].Updated; u > e.now.Unix() {
				t.Fatalf("served updated %d is ahead of now %d", u, e.now.Unix())
			}
		})
	}
	// The clamp is counted.
	e := newTestEnv(t)
	e.post(t, "tok-a", reportFor("node-a", e.now.Add(30*time.Second), 10))
	if got := testutil.ToFloat64(e.srv.futureClamped); got != 1 {
		t.Fatalf("future reports counted %v, want 1", got)
	}
}

// Impossible times give readable messages (no overflowed durations or dates), and nothing the
// caller sent is echoed unbounded.
func TestRefusalMessagesAreBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name    string
		mut     func(*Report)
		reason  string
		want    []string
		notWant []string
	}{
		{"time at the end of int64", func(r *Report) { r.Time = math.MaxInt64 }, ReasonBadTime,
			[]string{"9223372036854775807 (Unix seconds)", "ahead of the watcher"}, []string{"2562047h", "292277026596"}},
		{"time in year 9999", func(r *Report) { r.Time = 253402300799 }, ReasonBadTime, []string{"9999-12-31T23:59:59Z"}, nil},
		{"time one second after the epoch", func(r *Report) { r.Time = 1 }, ReasonBadTime, []string{"1970-01-01T00:00:01Z", "older than 5m0s"}, nil},
		{"negative time", func(r *Report) { r.Time = math.MinInt64 }, ReasonBadTime, []string{"-9223372036854775808"}, nil},
		{"huge node name", func(r *Report) { r.Node = strings.Repeat("N", 100_000) }, ReasonBadNode, []string{"…"}, nil},
		{"huge instance", func(r *Report) { r.Instance = strings.Repeat("i", 100_000) }, ReasonBadInstance, []string{"…"}, nil},
		{"instance without seq", func(r *Report) { r.Instance = "run-1" }, ReasonBadInstance, []string{"seq"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := validReport()
			r.Time = now.Unix()
			tc.mut(&r)
			err := ValidateReport(&r, now, Limits{})
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Reason != tc.reason {
				t.Fatalf("err %v, want reason %s", err, tc.reason)
			}
			if len(ve.Msg) > 1024 {
				t.Fatalf("message of %d bytes", len(ve.Msg))
			}
			for _, w := range tc.want {
				if !strings.Contains(ve.Msg, w) {
					t.Errorf("message %q lacks %q", ve.Msg, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(ve.Msg, w) {
					t.Errorf("message %q contains %q", ve.Msg, w)
				}
			}
		})
	}
	// Over HTTP too: the refusal's body quotes the node name truncated, like the log.
	e := newTestEnv(t)
	var r Report
	_ = json.Unmarshal(reportFor("node-a", e.now, 10), &r)
	r.Node = strings.Repeat("x", 200_000)
	b, _ := json.Marshal(r)
	code, body := e.post(t, "tok-a", b)
	if code != http.StatusBadRequest || !strings.HasPrefix(body, ReasonBadNode) || len(body) > 1024 {
		t.Fatalf("huge node name: %d, %d-byte body %.200q", code, len(body), body)
	}
}
