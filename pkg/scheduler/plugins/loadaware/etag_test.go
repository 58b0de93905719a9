package loadaware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	"k8s.io/component-base/metrics/testutil"

	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/loadwatcher"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// statusRecorder wraps a handler and keeps the status codes it answered.
type statusRecorder struct {
	h     http.Handler
	mu    sync.Mutex
	codes []int
	inm   []string
}

func (s *statusRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, r)
	s.mu.Lock()
	s.codes = append(s.codes, rec.Code)
	s.inm = append(s.inm, r.Header.Get("If-None-Match"))
	s.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (s *statusRecorder) last() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.codes[len(s.codes)-1], s.inm[len(s.inm)-1]
}

// Against Berth's real watcher server: the plugin sends the ETag it holds, a poll with nothing
// new is a 304 that keeps the snapshot, and a new report brings a new document.
func TestRefreshUsesETag(t *testing.T) {
	store := loadwatcher.NewStore(loadwatcher.SourceAgent, 5*time.Minute)
	put := func(cpu float64) {
		r := loadapi.Report{Node: "n1", Time: time.Now().Unix(), Latest: loadapi.Latest{CPU: cpu, Memory: 10},
			Windows: []loadapi.WindowReport{{Window: "15m", Samples: 10, CPU: loadapi.ResourceStats{Avg: cpu}, Memory: loadapi.ResourceStats{Avg: 10}}}}
		store.Put("n1", loadwatcher.NodeLoad{Updated: time.Unix(r.Time, 0), Windows: loadwatcher.WindowsFromReport(&r)})
	}
	put(30)
	rec := &statusRecorder{h: loadwatcher.NewServer(store).Handler()}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	e := newEngine(t, srv.URL, nil, nil)
	ctx := context.Background()
	steps := []struct {
		name    string
		do      func()
		code    int
		sentINM bool
		cpu     float64
	}{
		{"first fetch: full document", nil, http.StatusOK, false, 30},
		{"nothing new: 304, snapshot kept", nil, http.StatusNotModified, true, 30},
		{"a report: new document", func() { put(70) }, http.StatusOK, true, 70},
		{"nothing new again", nil, http.StatusNotModified, true, 70},
	}
	for _, st := range steps {
		if st.do != nil {
			st.do()
		}
		before := e.Watcher.Snapshot()
		if err := e.Watcher.Refresh(ctx); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		code, inm := rec.last()
		if code != st.code || (inm != "") != st.sentINM {
			t.Fatalf("%s: watcher answered %d to If-None-Match %q, want %d (sent: %v)", st.name, code, inm, st.code, st.sentINM)
		}
		if code == http.StatusNotModified && e.Watcher.Snapshot() != before {
			t.Fatalf("%s: a 304 replaced the snapshot", st.name)
		}
		if v := e.Node("n1"); v.Freshness != Fresh || v.Metrics.CPU.Avg != st.cpu {
			t.Fatalf("%s: node %+v, want fresh at %v%%", st.name, v, st.cpu)
		}
	}
}

// A 304 the plugin did not ask for (no snapshot held) is a broken answer, not success.
func TestUnsolicited304IsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) }))
	defer srv.Close()
	e := newEngine(t, srv.URL, nil, nil)
	if err := e.Watcher.Refresh(context.Background()); err == nil || e.Watcher.Snapshot() != nil {
		t.Fatalf("unsolicited 304: err %v, snapshot %v", err, e.Watcher.Snapshot())
	}
}

// Out-of-range values of a document are clamped in the digest and counted per plugin.
func TestOutOfRangeCounted(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{
		"n": {lat.Metric(watcher.CPU, watcher.Average, -13), lat.Metric(watcher.CPU, watcher.Std, 400),
			lat.Metric(watcher.Memory, watcher.Average, 101), lat.Metric(watcher.Memory, watcher.Std, 3)},
	}))
	e, err := NewEngine(context.Background(), "OutOfRangeTest", defaulted(w.URL, nil), nil, cpuEstimate(100), Options{NoLoop: true})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := testutil.GetCounterMetricValue(outOfRange.WithLabelValues("OutOfRangeTest"))
	if err := e.Watcher.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, _ := testutil.GetCounterMetricValue(outOfRange.WithLabelValues("OutOfRangeTest"))
	m := e.Node("n").Metrics
	if after-before != 3 || m.CPU.Avg != 0 || m.CPU.Std != 100 || m.Memory.Avg != 100 || m.Memory.Std != 3 {
		t.Fatalf("counted %v (want 3), metrics %+v", after-before, m)
	}
}
