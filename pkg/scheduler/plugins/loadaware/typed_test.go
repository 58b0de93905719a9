package loadaware

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	"k8s.io/component-base/metrics/testutil"

	"github.com/berth-sched/berth/pkg/loadapi"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// bothForms writes one node load in Berth's typed form and in the upstream form Berth's watcher
// serves for it (Latest, AVG, STD per resource; berthNodes for freshness and pods).
func bothForms(ts time.Time, name string, nl loadapi.NodeLoad) (*loadapi.Load, *loadapi.Response) {
	load := &loadapi.Load{Timestamp: ts.Unix(), Window: "15m", Source: "BerthAgent", Nodes: map[string]loadapi.NodeLoad{name: nl}}
	var ms []watcher.Metric
	add := func(typ string, r *loadapi.ResourceLoad) {
		if r != nil {
			ms = append(ms, lat.Metric(typ, watcher.Latest, 99), lat.Metric(typ, watcher.Average, r.Avg), lat.Metric(typ, watcher.Std, r.Std))
		}
	}
	add(watcher.CPU, nl.CPU)
	add(watcher.Memory, nl.Memory)
	doc := lat.Doc(ts, nil)
	doc.Source = "BerthAgent"
	if ms != nil {
		doc.Data.NodeMetricsMap[name] = watcher.NodeMetrics{Metrics: ms}
	}
	doc.Nodes = map[string]loadapi.NodeStatus{name: {Updated: nl.Updated, Stale: nl.Stale, PodUIDs: nl.PodUIDs, Pods: nl.Pods}}
	return load, doc
}

// The typed form and the upstream form of the same load must give every plugin the same view:
// the typed path is a decoding change, never a scoring one.
func TestTypedFormReadsAsUpstreamForm(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	pods := []loadapi.PodUsage{{UID: "u1", Latest: loadapi.Latest{CPU: 4, Memory: 2}, Windows: []loadapi.PodWindow{{Window: "15m", CPU: 3, Memory: 1}}}}
	tests := []struct {
		name string
		nl   loadapi.NodeLoad
		want Freshness
	}{
		{"fresh", loadapi.NodeLoad{Updated: now.Unix() - 10, CPU: &loadapi.ResourceLoad{Avg: 40, Std: 5}, Memory: &loadapi.ResourceLoad{Avg: 60, Std: 1}}, Fresh},
		{"fresh with pods", loadapi.NodeLoad{Updated: now.Unix() - 10, CPU: &loadapi.ResourceLoad{Avg: 40, Std: 5}, Memory: &loadapi.ResourceLoad{Avg: 60}, PodUIDs: []string{"u1", "u2"}, Pods: pods}, Fresh},
		{"memory only", loadapi.NodeLoad{Updated: now.Unix() - 10, Memory: &loadapi.ResourceLoad{Avg: 60, Std: 1}}, Fresh},
		{"expired", loadapi.NodeLoad{Updated: now.Unix() - 3600, CPU: &loadapi.ResourceLoad{Avg: 40}}, Expired},
		{"stale", loadapi.NodeLoad{Updated: now.Unix() - 600, Stale: true}, Stale},
		{"never reported", loadapi.NodeLoad{Stale: true}, Stale},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			load, doc := bothForms(now, "n", tc.nl)
			typed := NewLoadSnapshot(load, now, now).Node("n", now, 5*time.Minute)
			upstream := NewSnapshot(doc, now, now).Node("n", now, 5*time.Minute)
			if typed.Freshness != tc.want {
				t.Errorf("typed form: freshness %v, want %v", typed.Freshness, tc.want)
			}
			if !reflect.DeepEqual(typed, upstream) {
				t.Errorf("the two forms read differently:\n typed    %+v\n upstream %+v", typed, upstream)
			}
		})
	}
}

// A third-party value outside [0,100] % is clamped and counted in the typed form as in the
// upstream one; scores computed from it would leave their range.
func TestTypedFormClampsOutOfRange(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	load := &loadapi.Load{Timestamp: now.Unix(), Window: "5m", Nodes: map[string]loadapi.NodeLoad{
		"n": {Updated: now.Unix(), CPU: &loadapi.ResourceLoad{Avg: 150, Std: -1}, Memory: &loadapi.ResourceLoad{Avg: 20}},
	}}
	s := NewLoadSnapshot(load, now, now)
	v := s.Node("n", now, time.Minute)
	if v.Metrics.CPU != (ResourceData{100, 0, true}) || v.Metrics.Memory != (ResourceData{20, 0, true}) {
		t.Errorf("metrics %+v, want CPU {100 0 true}, memory {20 0 true}", v.Metrics)
	}
	if s.OutOfRange != 2 {
		t.Errorf("OutOfRange %d, want 2", s.OutOfRange)
	}
	if s.Window != 5*time.Minute || v.Window != 5*time.Minute {
		t.Errorf("window %v/%v, want the document's 5m", s.Window, v.Window)
	}
}

// The scheduler asks for the typed form and reads it when served; a watcher that only knows
// the upstream form (upstream load-watcher, or Berth's before the typed form) still works.
func TestEngineReadsTypedFormAndFallsBack(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	e := newEngine(t, w.URL, nil, nil)
	ctx := context.Background()
	now := time.Now()
	// Different numbers in the two forms tell which one the engine read.
	load, _ := bothForms(now, "n", loadapi.NodeLoad{Updated: now.Unix(), CPU: &loadapi.ResourceLoad{Avg: 30, Std: 2}})
	_, doc := bothForms(now, "n", loadapi.NodeLoad{Updated: now.Unix(), CPU: &loadapi.ResourceLoad{Avg: 70, Std: 9}})
	tests := []struct {
		name  string
		serve func()
		want  ResourceData
		form  string
	}{
		{"typed watcher", func() { w.SetBoth(load, doc) }, ResourceData{30, 2, true}, FormTyped},
		{"upstream-only watcher", func() { w.Set(doc) }, ResourceData{70, 9, true}, FormUpstream},
		{"typed again", func() { w.SetBoth(load, doc) }, ResourceData{30, 2, true}, FormTyped},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.serve()
			forms := map[string]float64{}
			for _, f := range []string{FormTyped, FormUpstream} {
				forms[f], _ = testutil.GetCounterMetricValue(documentForms.WithLabelValues("Test", f))
			}
			if err := e.Watcher.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(w.Accept(), loadapi.LoadMediaType) {
				t.Errorf("Accept %q does not ask for %s first", w.Accept(), loadapi.LoadMediaType)
			}
			if v := e.Node("n"); v.Freshness != Fresh || v.Metrics.CPU != tc.want {
				t.Errorf("node %v %+v, want fresh %+v", v.Freshness, v.Metrics.CPU, tc.want)
			}
			if got := e.Watcher.Snapshot().Form; got != tc.form {
				t.Errorf("snapshot form %q, want %q", got, tc.form)
			}
			if after, _ := testutil.GetCounterMetricValue(documentForms.WithLabelValues("Test", tc.form)); after != forms[tc.form]+1 {
				t.Errorf("watcher_documents_total{form=%q} %v → %v, want one more", tc.form, forms[tc.form], after)
			}
		})
	}
}

// A typed answer with nothing in it is refused like an empty upstream one: the data held stays.
func TestEmptyTypedFormKeepsSnapshot(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	e := newEngine(t, w.URL, nil, nil)
	now := time.Now()
	load, doc := bothForms(now, "n", loadapi.NodeLoad{Updated: now.Unix(), CPU: &loadapi.ResourceLoad{Avg: 30}})
	w.SetBoth(load, doc)
	if err := e.Watcher.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.SetBoth(&loadapi.Load{}, doc)
	if err := e.Watcher.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "empty document") {
		t.Fatalf("empty typed document: error %v, want empty document", err)
	}
	if v := e.Node("n"); v.Metrics.CPU.Avg != 30 {
		t.Errorf("snapshot replaced by an empty document: %+v", v.Metrics)
	}
}
