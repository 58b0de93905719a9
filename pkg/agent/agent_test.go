package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/agent/load/fixture"
	"github.com/berth-sched/berth/pkg/loadapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func pod(name, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
}

// runFixture keeps fx's files changing until cancel; stop also waits for the writer, so that
// TempDir's cleanup does not race it.
func runFixture(fx *fixture.Node) (ctx context.Context, cancel, stop func()) {
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { fx.Run(ctx, 2*time.Millisecond); close(done) }()
	return ctx, cancel, func() { cancel(); <-done }
}

// runningFixture is a node at cpu and mem percent, its files changing until the test ends (or
// cancel).
func runningFixture(t *testing.T, cpu, mem float64) (*fixture.Node, context.Context, func()) {
	t.Helper()
	fx, err := fixture.New(t.TempDir(), cpu, mem)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel, stop := runFixture(fx)
	t.Cleanup(stop)
	return fx, ctx, cancel
}

// reportSink is a load watcher that keeps every report it is sent.
type reportSink struct {
	mu      sync.Mutex
	reports []loadapi.Report
}

// newReportSink serves a reportSink until the test ends; token, when set, is the bearer token
// every report must carry.
func newReportSink(t *testing.T, token string) (*reportSink, *httptest.Server) {
	s := &reportSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep loadapi.Report
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			t.Errorf("decode: %v", err)
		}
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			t.Errorf("auth header %q", r.Header.Get("Authorization"))
		}
		s.mu.Lock()
		s.reports = append(s.reports, rep)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

// all is a copy of the reports received so far, in order.
func (s *reportSink) all() []loadapi.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]loadapi.Report(nil), s.reports...)
}

func TestAgentRunPushesReportsAndServesMetrics(t *testing.T) {
	fx, ctx, cancel := runningFixture(t, 25, 50)

	sink, watcher := newReportSink(t, "sa-token")
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("sa-token"), 0o600)

	cs := fake.NewClientset(pod("mine", "node-a", corev1.PodRunning), pod("done", "node-a", corev1.PodSucceeded),
		pod("other", "node-b", corev1.PodRunning))
	a, err := New(Config{NodeName: "node-a", ProcRoot: fx.Root, WatcherURL: watcher.URL, TokenFile: tok, Listen: "127.0.0.1:0",
		SampleInterval: 10 * time.Millisecond, ReportInterval: 100 * time.Millisecond, Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler()
	if code := get(t, h, "/readyz").Code; code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before any sample = %d, want 503", code)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if len(sink.all()) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no reports within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	reports := sink.all()
	rep := reports[len(reports)-1]
	if rep.Node != "node-a" || len(rep.PodUIDs) != 1 || rep.PodUIDs[0] != "uid-mine" {
		t.Fatalf("report %+v: want node-a with only its running pod", rep)
	}
	if len(rep.Windows) == 0 || rep.Windows[0].CPU.Avg < 24.9 || rep.Windows[0].CPU.Avg > 25.1 {
		t.Fatalf("windows %+v, want CPU 25 %%", rep.Windows)
	}
	// One run, numbered reports: the watcher orders by these, not by this node's clock.
	for i, r := range reports {
		if len(r.Instance) != 16 || r.Instance != reports[0].Instance || r.Seq != uint64(i+1) {
			t.Errorf("report %d: instance %q seq %d, want the run's 16-character instance and seq %d", i, r.Instance, r.Seq, i+1)
		}
	}
	if code := get(t, h, "/readyz").Code; code != http.StatusOK {
		t.Fatalf("/readyz = %d once sampling and synced", code)
	}
	metrics := get(t, h, "/metrics").Body.String()
	for _, want := range []string{`berth_node_cpu_utilisation_percent{node="node-a"} 25`, `berth_node_memory_utilisation_percent{node="node-a"} 50`,
		`berth_agent_reports_total{outcome="pushed"}`, `berth_agent_report_attempts_total{result="ok"}`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
}

func get(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := Config{NodeName: "n", WatcherURL: "http://x", TokenFile: "/t", SampleInterval: time.Second, ReportInterval: time.Second}
	for name, mut := range map[string]func(*Config){
		"no node":       func(c *Config) { c.NodeName = "" },
		"no watcher":    func(c *Config) { c.WatcherURL = "" },
		"zero interval": func(c *Config) { c.ReportInterval = 0 },
		"two windows":   func(c *Config) { c.Windows = []time.Duration{time.Minute, 2 * time.Minute} },
		"windows out of order": func(c *Config) {
			c.Windows = []time.Duration{time.Minute, 3 * time.Minute, 2 * time.Minute}
		},
		"window under the sample interval": func(c *Config) {
			c.Windows = []time.Duration{time.Millisecond, time.Minute, 2 * time.Minute}
		},
	} {
		c := good
		mut(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
}

// TestReadyChecks: an optional part added with AddReadyCheck (the PodConfig executor) holds
// /readyz at 503, naming itself and its reason, until it passes; the load part's own
// conditions still come first.
func TestReadyChecks(t *testing.T) {
	fx, _, _ := runningFixture(t, 25, 50)
	a, err := New(Config{NodeName: "node-a", ProcRoot: fx.Root, WatcherURL: "http://127.0.0.1:9", TokenFile: "/nonexistent",
		SampleInterval: time.Second, ReportInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	podnetErr := errors.New("PodConfig executor: container runtime not reached yet: CRI socket gone")
	a.AddReadyCheck("podconfig", func() error { mu.Lock(); defer mu.Unlock(); return podnetErr })
	h := a.Handler()
	steps := []struct {
		name     string
		do       func()
		wantCode int
		wantBody string
	}{
		{name: "no sample yet: the load part's reason first", do: func() {}, wantCode: http.StatusServiceUnavailable, wantBody: "no load sample yet"},
		{name: "sampled, executor not ready: 503 naming it", do: func() {
			deadline := time.Now().Add(5 * time.Second)
			for {
				if _, ok, _ := a.Sampler().SampleOnce(); ok || time.Now().After(deadline) {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}, wantCode: http.StatusServiceUnavailable, wantBody: "podconfig: PodConfig executor: container runtime not reached yet: CRI socket gone"},
		{name: "executor ready: 200", do: func() { mu.Lock(); podnetErr = nil; mu.Unlock() }, wantCode: http.StatusOK, wantBody: "ok"},
	}
	for _, s := range steps {
		s.do()
		r := get(t, h, "/readyz")
		if r.Code != s.wantCode || !strings.Contains(r.Body.String(), s.wantBody) {
			t.Errorf("%s: /readyz = %d %q, want %d %q", s.name, r.Code, r.Body.String(), s.wantCode, s.wantBody)
		}
	}
}

// TestAgentReportsPodUsage: with --cgroup-root the report carries the listed pods' usage read
// from their cgroups; a listed pod without a cgroup is left out of pods (still in podUIDs) and
// counted, and the report still goes out.
func TestAgentReportsPodUsage(t *testing.T) {
	dir := t.TempDir()
	fx, err := fixture.New(filepath.Join(dir, "proc"), 40, 50)
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.EnableCgroups(filepath.Join(dir, "cgroup")); err != nil {
		t.Fatal(err)
	}
	if err := fx.SetPods([]fixture.Pod{{UID: "uid-mine", QOS: "burstable", CPU: 15, MemoryBytes: 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel, stop := runFixture(fx)
	defer stop()

	sink, watcher := newReportSink(t, "")
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("sa-token"), 0o600)
	mine := pod("mine", "node-a", corev1.PodRunning)
	mine.Status.QOSClass = corev1.PodQOSBurstable
	cs := fake.NewClientset(mine, pod("nocgroup", "node-a", corev1.PodRunning))
	windows := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	a, err := New(Config{NodeName: "node-a", ProcRoot: fx.Root, WatcherURL: watcher.URL, TokenFile: tok, Listen: "127.0.0.1:0",
		SampleInterval: 10 * time.Millisecond, ReportInterval: 100 * time.Millisecond, Client: cs,
		CgroupRoot: fx.CgroupRoot(), Windows: windows})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	var rep loadapi.Report
	deadline := time.Now().Add(10 * time.Second)
	for {
		if reports := sink.all(); len(reports) > 0 {
			rep = reports[len(reports)-1]
		}
		// Enough samples in the 1 s window for its average to settle (see below).
		if len(rep.Pods) > 0 && len(rep.PodUIDs) == 2 && len(rep.Windows) > 0 && rep.Windows[0].Samples >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report with pod usage within 10 s; last %+v", rep)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(rep.Pods) != 1 || rep.Pods[0].UID != "uid-mine" {
		t.Fatalf("pods %+v, want only uid-mine (nocgroup has no cgroup)", rep.Pods)
	}
	p := rep.Pods[0]
	// The fixture advances every 2 ms and writes /proc/stat before the pod's cpu.stat, the
	// agent samples every 10 ms: a sample that falls between the two writes gives the pod one
	// advance more or less than the node (±20 % of its share here), so one sample is only
	// checked for sense; over 50+ samples the deltas telescope and the average is 15 %.
	if p.Latest.CPU <= 0 || p.Latest.CPU > 30 || len(p.Windows) != 3 {
		t.Fatalf("pod usage %+v, want a latest share near 15 %% CPU and 3 windows", p)
	}
	if d := p.Windows[0].CPU - 15; d < -1.5 || d > 1.5 {
		t.Fatalf("pod's 1 s window average %.2f %% over %d samples, want 15 ± 1.5", p.Windows[0].CPU, rep.Windows[0].Samples)
	}
	metrics := get(t, a.Handler(), "/metrics").Body.String()
	if !strings.Contains(metrics, `berth_agent_pod_usage_errors_total{reason="gone"}`) {
		t.Fatalf("/metrics does not count the pod without a cgroup:\n%s", metrics)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
