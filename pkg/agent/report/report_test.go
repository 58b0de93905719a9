package report

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/agent/load"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/loadwatcher"
)

func testReport() *loadapi.Report {
	return &loadapi.Report{Node: "n1", Time: time.Now().Unix(), Windows: []loadapi.WindowReport{{Window: "5m", Samples: 1}}}
}

// noSleep records the backoff delays instead of sleeping, so the test is fast and can check them.
func noSleep(delays *[]time.Duration) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		*delays = append(*delays, d)
		return ctx.Err()
	}
}

func TestPushRetriesThenSucceeds(t *testing.T) {
	var mu sync.Mutex
	var tokens []string
	statuses := []int{500, 503, 401, 204}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != loadapi.ReportPath {
			t.Errorf("%s %s", r.Method, r.URL.Path)
		}
		var rep loadapi.Report
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil || rep.Node != "n1" {
			t.Errorf("body: %+v %v", rep, err)
		}
		tokens = append(tokens, r.Header.Get("Authorization"))
		w.WriteHeader(statuses[len(tokens)-1])
	}))
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte("tok-1\n"), 0o600)
	var delays []time.Duration
	var results []string
	p := &Pusher{URL: srv.URL + "/", TokenFile: tokFile, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		OnAttempt: func(r string) { results = append(results, r) }}
	p.sleep = func(ctx context.Context, d time.Duration) error {
		delays = append(delays, d)
		// The kubelet rotates the projected token between two attempts.
		os.WriteFile(tokFile, []byte("tok-2"), 0o600)
		return nil
	}
	if err := p.Push(context.Background(), testReport()); err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 4 || tokens[0] != "Bearer tok-1" || tokens[3] != "Bearer tok-2" {
		t.Fatalf("tokens %q: want 4 attempts, the token re-read after rotation", tokens)
	}
	if want := []string{"retry", "retry", "retry", "ok"}; len(results) != 4 || results[0] != want[0] || results[3] != want[3] {
		t.Fatalf("attempt results %v, want %v", results, want)
	}
	// Backoff doubles from 100 ms, capped at 300 ms, with jitter in [d/2, d].
	bounds := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
	if len(delays) != 3 {
		t.Fatalf("delays %v", delays)
	}
	for i, d := range delays {
		if d < bounds[i]/2 || d > bounds[i] {
			t.Fatalf("delay %d = %v, want in [%v, %v]", i, d, bounds[i]/2, bounds[i])
		}
	}
}

func TestPushPermanentRefusalIsNotRetried(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		http.Error(w, "wrong_node: pod runs elsewhere", http.StatusForbidden)
	}))
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte("t"), 0o600)
	var delays []time.Duration
	p := &Pusher{URL: srv.URL, TokenFile: tokFile, sleep: noSleep(&delays)}
	err := p.Push(context.Background(), testReport())
	var perm *PermanentError
	if !errors.As(err, &perm) || perm.Status != 403 || calls != 1 || len(delays) != 0 {
		t.Fatalf("err=%v calls=%d delays=%v: want one attempt and a permanent 403", err, calls, delays)
	}
}

func TestPushGivesUpWhenContextEnds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte("t"), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	p := &Pusher{URL: srv.URL, TokenFile: tokFile, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}
	start := time.Now()
	err := p.Push(ctx, testReport())
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("err=%v after %v: want failure once the report interval is over", err, time.Since(start))
	}
}

func TestPushMissingTokenFileIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "token")
	var delays []time.Duration
	p := &Pusher{URL: srv.URL, TokenFile: tokFile}
	p.sleep = func(ctx context.Context, d time.Duration) error {
		delays = append(delays, d)
		return os.WriteFile(tokFile, []byte("t"), 0o600) // the kubelet writes the token late
	}
	if err := p.Push(context.Background(), testReport()); err != nil || len(delays) != 1 {
		t.Fatalf("err=%v delays=%v", err, delays)
	}
}

func TestBuild(t *testing.T) {
	n, err := fixture.New(t.TempDir(), 40, 30)
	if err != nil {
		t.Fatal(err)
	}
	s := load.NewSampler(n.Root, time.Second)
	now := time.Unix(1_700_000_000, 0)
	s.SetClock(func() time.Time { return now })
	if _, ok := Build("n1", s, now, nil); ok {
		t.Fatal("built a report without samples")
	}
	s.SampleOnce()
	for i := 0; i < 400; i++ { // 6m40s: the 5m and 10m windows differ in sample count
		now = now.Add(time.Second)
		n.Advance()
		s.SampleOnce()
	}
	r, ok := Build("n1", s, now, []string{"b", "a"})
	if !ok {
		t.Fatal("no report")
	}
	if r.Node != "n1" || r.Time != now.Unix() || len(r.Windows) != 3 || r.PodUIDs[0] != "b" {
		t.Fatalf("report %+v", r)
	}
	if r.Windows[0].Window != "5m" || r.Windows[0].Samples != 300 || r.Windows[2].Window != "15m" || r.Windows[2].Samples != 400 {
		t.Fatalf("windows %+v", r.Windows)
	}
	if d := r.Windows[1].CPU.Avg - 40; d > 0.01 || d < -0.01 || r.Latest.Memory < 29.99 || r.Latest.Memory > 30.01 {
		t.Fatalf("values %+v latest %+v", r.Windows[1], r.Latest)
	}
	if err := loadwatcher.ValidateReport(&r, now, loadwatcher.Limits{}); err != nil {
		t.Fatalf("the agent builds a report the watcher refuses: %v", err)
	}
}

func TestClamper(t *testing.T) {
	tests := []struct {
		in, want float64
		counted  bool
	}{
		{0, 0, false}, {55.5, 55.5, false}, {100, 100, false},
		{100.00000000001, 100, true}, {-0.0001, 0, true}, {1e9, 100, true}, {math.NaN(), 0, true}, {math.Inf(-1), 0, true},
	}
	for _, tc := range tests {
		var c clamper
		if got := c.pct(tc.in); got != tc.want || (c.n == 1) != tc.counted {
			t.Errorf("pct(%v) = %v counted %d, want %v counted %v", tc.in, got, c.n, tc.want, tc.counted)
		}
	}
}

func TestBuildPods(t *testing.T) {
	dir := t.TempDir()
	n, err := fixture.New(dir+"/proc", 40, 30)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.EnableCgroups(dir + "/cgroup"); err != nil {
		t.Fatal(err)
	}
	n.SetPods([]fixture.Pod{{UID: "a", CPU: 10, MemoryBytes: 1 << 20}, {UID: "x", CPU: 5}})
	s := load.NewSamplerWindows(n.Root, time.Second, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second})
	now := time.Unix(1_700_000_000, 0)
	s.SetClock(func() time.Time { return now })
	listed := false
	s.SetPods(load.NewCgroups(dir+"/cgroup"), func() []load.PodRef {
		if !listed {
			return nil
		}
		return []load.PodRef{{UID: "a"}, {UID: "x"}}
	}, 0, nil)
	s.SampleOnce()
	for i := range 6 {
		now = now.Add(time.Second)
		n.Advance()
		listed = i >= 2 // the pod starts at the 3rd sample: primed there, shares from the 4th
		s.SampleOnce()
	}
	// "x" was read but the report's pod list does not name it: it must not be in Pods.
	r, ok := Build("n1", s, now, []string{"a", "b"})
	if !ok || len(r.Pods) != 1 || r.Pods[0].UID != "a" {
		t.Fatalf("pods %+v", r.Pods)
	}
	p := r.Pods[0]
	// 3 shares against the node's 6 samples: 2/2, 3/4 and 3/6 of 10 %.
	want := []float64{10, 7.5, 5}
	if len(p.Windows) != 3 || p.Windows[2].Window != "15m" {
		t.Fatalf("windows %+v", p.Windows)
	}
	for i, w := range want {
		if d := p.Windows[i].CPU - w; d > 0.01 || d < -0.01 {
			t.Errorf("window %s cpu %.3f, want %.3f", p.Windows[i].Window, p.Windows[i].CPU, w)
		}
	}
	if p.CPUMillicores != 100 || p.MemoryBytes != 1<<20 || p.Latest.CPU < 9.99 || p.Latest.CPU > 10.01 {
		t.Fatalf("pod %+v", p)
	}
	if err := loadwatcher.ValidateReport(&r, now, loadwatcher.Limits{}); err != nil {
		t.Fatalf("the agent builds a report the watcher refuses: %v", err)
	}
}
