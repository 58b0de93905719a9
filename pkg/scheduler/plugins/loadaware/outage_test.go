package loadaware

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/component-base/metrics/testutil"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(prefix, args string) {
	l.mu.Lock()
	l.all = append(l.all, prefix+" "+args)
	l.mu.Unlock()
}
func (l *lines) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.all
	l.all = nil
	return out
}

// With the watcher down, the refresh loop logs when the outage starts, at most once per
// outageLogEvery while it lasts, and once when it ends; every failure is counted and the
// snapshot's age grows.
func TestOutageLoggedQuietly(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	clk := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return clk }
	const plugin = "OutageTest"
	e, err := NewEngine(context.Background(), plugin, defaulted(w.URL, nil), nil, cpuEstimate(100), Options{Now: now, NoLoop: true})
	if err != nil {
		t.Fatal(err)
	}
	var got lines
	logger := funcr.New(got.add, funcr.Options{})
	ctx := context.Background()
	w.Set(lat.CPUDoc(clk, map[string]float64{"n": 10}))
	e.Watcher.RefreshLogged(ctx, logger)
	errsBefore, _ := testutil.GetCounterMetricValue(refreshErrors.WithLabelValues(plugin))

	steps := []struct {
		name    string
		up      bool
		seconds int      // refreshes, one per second
		want    []string // substrings of the lines logged, in order
	}{
		{"healthy: silent", true, 10, nil},
		{"down for 299 s: one line", false, 299, []string{"Load watcher unreachable"}},
		{"down past 5 min: one more", false, 2, []string{"Load watcher still unreachable"}},
		{"down another 4 min: silent", false, 240, nil},
		{"back: one line", true, 5, []string{"Load watcher reachable again"}},
		{"down again: a new outage", false, 3, []string{"Load watcher unreachable"}},
	}
	failures := 0
	for _, st := range steps {
		if st.up {
			w.Set(lat.CPUDoc(clk, map[string]float64{"n": 10}))
		} else {
			w.Fail(http.StatusInternalServerError)
			failures += st.seconds
		}
		for range st.seconds {
			clk = clk.Add(time.Second)
			e.Watcher.RefreshLogged(ctx, logger)
		}
		logged := got.take()
		if len(logged) != len(st.want) {
			t.Fatalf("%s: %d lines, want %d: %q", st.name, len(logged), len(st.want), logged)
		}
		for i, w := range st.want {
			if !strings.Contains(logged[i], w) {
				t.Fatalf("%s: line %q lacks %q", st.name, logged[i], w)
			}
		}
	}
	errsAfter, _ := testutil.GetCounterMetricValue(refreshErrors.WithLabelValues(plugin))
	if int(errsAfter-errsBefore) != failures {
		t.Fatalf("refresh errors counted %v, want %d", errsAfter-errsBefore, failures)
	}
	// The last success was 3 s ago (the outage in progress).
	if age, _ := testutil.GetGaugeMetricValue(snapshotAgeSeconds.WithLabelValues(plugin)); age != 3 {
		t.Fatalf("snapshot age %v s, want 3", age)
	}
}
