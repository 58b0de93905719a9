package loadaware

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/loadapi"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

func defaulted(addr string, mutate func(*CommonArgs)) CommonArgs {
	a := CommonArgs{WatcherAddress: addr}
	if mutate != nil {
		mutate(&a)
	}
	configv1.SetDefaults_LoadAwareArgs(&a)
	return a
}

func cpuEstimate(m int64) Estimator {
	return func(*v1.Pod) Estimate { return Estimate{MilliCPU: m} }
}

func newEngine(t *testing.T, addr string, mutate func(*CommonArgs), now func() time.Time) *Engine {
	t.Helper()
	e, err := NewEngine(context.Background(), "Test", defaulted(addr, mutate), nil, cpuEstimate(100), Options{Now: now, NoLoop: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestWatcherFailuresKeepLastSnapshot(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	e := newEngine(t, w.URL, func(a *CommonArgs) { one := int64(1); a.WatcherTimeoutSeconds = &one }, nil)
	ctx := context.Background()

	// Before any data: 500 → error, no snapshot, node Missing (neutral), nothing panics.
	if err := e.Watcher.Refresh(ctx); err == nil {
		t.Fatal("500 before first data: no error")
	}
	if v := e.Node("n"); v.Freshness != Missing {
		t.Fatalf("no snapshot: freshness %v, want missing", v.Freshness)
	}

	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"n": 42}))
	if err := e.Watcher.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	good := e.Watcher.Snapshot()

	for _, tc := range []struct {
		name    string
		breakIt func()
		kind    string
	}{
		{"500", func() { w.Fail(http.StatusInternalServerError) }, "http_status"},
		{"404", func() { w.Fail(http.StatusNotFound) }, "http_status"},
		{"garbage", func() { w.Garbage("<html>not json") }, "decode"},
		{"wrong types", func() { w.Garbage(`{"timestamp":"yesterday"}`) }, "decode"},
		{"empty document", func() { w.Garbage(`{"timestamp":0,"window":{},"data":{"NodeMetricsMap":null}}`) }, "decode"},
		{"KEP example shape", func() { w.Garbage(`{"data":{"node-1":{"metrics":[{"type":"cpu","value":20}]}}}`) }, "decode"},
		{"hang", func() { w.Hang() }, "transport"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.breakIt()
			_, failsBefore := e.Watcher.Counts()
			metricBefore, _ := testutil.GetCounterMetricValue(fetchTotal.WithLabelValues("Test", tc.kind))
			start := time.Now()
			err := e.Watcher.Refresh(ctx)
			if err == nil {
				t.Fatal("no error")
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("fetch took %v with a 1 s timeout", d)
			}
			if e.Watcher.Snapshot() != good {
				t.Error("snapshot replaced after a failed fetch")
			}
			if v := e.Node("n"); v.Freshness != Fresh || v.Metrics.CPU.Avg != 42 {
				t.Errorf("node after failure: %+v", v)
			}
			if _, fails := e.Watcher.Counts(); fails != failsBefore+1 {
				t.Errorf("failures %d → %d", failsBefore, fails)
			}
			if after, _ := testutil.GetCounterMetricValue(fetchTotal.WithLabelValues("Test", tc.kind)); after != metricBefore+1 {
				t.Errorf("metric result=%s %v → %v", tc.kind, metricBefore, after)
			}
		})
	}
}

// Score must never wait for the network: reads during a hanging fetch return at once.
func TestReadsDoNotBlockOnHangingWatcher(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"n": 10}))
	e := newEngine(t, w.URL, func(a *CommonArgs) { s := int64(5); a.WatcherTimeoutSeconds = &s }, nil)
	if err := e.Watcher.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Hang()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Watcher.Refresh(ctx); close(done) }()
	time.Sleep(50 * time.Millisecond) // let the fetch reach the server
	start := time.Now()
	for i := 0; i < 1000; i++ {
		if v := e.Node("n"); v.Freshness != Fresh {
			t.Fatalf("freshness %v during a hanging fetch", v.Freshness)
		}
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("1000 reads took %v during a hanging fetch", d)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("fetch did not stop when its context was cancelled")
	}
}

// The loop starts with the engine, polls, and stops with the scheduler's context.
func TestLoopStopsWithContext(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"n": 10}))
	ctx, cancel := context.WithCancel(context.Background())
	args := defaulted(w.URL, func(a *CommonArgs) { one := int64(1); a.RefreshIntervalSeconds = &one })
	e, err := NewEngine(ctx, "Test", args, nil, cpuEstimate(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Requests.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if w.Requests.Load() < 2 || e.Watcher.Snapshot() == nil {
		t.Fatalf("loop made %d requests, snapshot %v", w.Requests.Load(), e.Watcher.Snapshot() != nil)
	}
	cancel()
	time.Sleep(100 * time.Millisecond) // an in-flight tick may still land
	n := w.Requests.Load()
	time.Sleep(2500 * time.Millisecond)
	if got := w.Requests.Load(); got != n {
		t.Errorf("loop kept polling after cancel: %d → %d requests", n, got)
	}
}

func TestSnapshotFreshnessAndClockSkew(t *testing.T) {
	local := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// The watcher's clock runs 1 h ahead; a node sampled 10 s before its "now" is fresh.
	server := local.Add(time.Hour)
	doc := lat.CPUDoc(server, map[string]float64{"a": 1, "b": 2, "nobm": 3})
	doc.Nodes = map[string]loadapi.NodeStatus{
		"a":     {Updated: server.Add(-10 * time.Second).Unix()},
		"b":     {Updated: server.Add(-400 * time.Second).Unix()},
		"stale": {Updated: server.Unix(), Stale: true},
	}
	s := NewSnapshot(doc, local, server)
	exp := 300 * time.Second
	for n, want := range map[string]Freshness{"a": Fresh, "b": Expired, "stale": Stale, "nobm": Fresh, "zzz": Missing} {
		if got := s.Node(n, local, exp).Freshness; got != want {
			t.Errorf("%s: %v, want %v", n, got, want)
		}
	}
	if !s.SignalAlive(local, exp) || s.SignalAlive(local.Add(time.Hour), exp) {
		t.Error("SignalAlive wrong")
	}
	// Without a Date header the watcher's times are taken as ours: everything 1 h in the
	// future is "fresh" and b is then fresh too (400 s before +1 h).
	s2 := NewSnapshot(doc, local, time.Time{})
	if got := s2.Node("b", local, exp).Freshness; got != Fresh {
		t.Errorf("no Date header: b %v", got)
	}
	var nilSnap *Snapshot
	if nilSnap.Node("a", local, exp).Freshness != Missing || nilSnap.SignalAlive(local, exp) {
		t.Error("nil snapshot must be all missing")
	}
}

func TestDigestFollowsUpstreamResourceData(t *testing.T) {
	m := lat.Metric
	// Reference vector: {CPU "" 40, CPU AVG 40, CPU STD 36, Mem AVG 20, Mem STD 10}.
	d, _ := digest([]watcher.Metric{m(watcher.CPU, "", 40), m(watcher.CPU, watcher.Average, 40), m(watcher.CPU, watcher.Std, 36),
		m(watcher.Memory, watcher.Average, 20), m(watcher.Memory, watcher.Std, 10)}, nil)
	if d.CPU != (ResourceData{40, 36, true}) || d.Memory != (ResourceData{20, 10, true}) {
		t.Errorf("digest: %+v", d)
	}
	// STD only → valid with avg 0; Latest after AVG ignored for the average.
	d, _ = digest([]watcher.Metric{m(watcher.CPU, watcher.Std, 5), m(watcher.Memory, watcher.Average, 30), m(watcher.Memory, watcher.Latest, 99)}, nil)
	if d.CPU != (ResourceData{0, 5, true}) || d.Memory != (ResourceData{30, 0, true}) {
		t.Errorf("digest: %+v", d)
	}
	d, _ = digest([]watcher.Metric{m(watcher.Bandwidth, watcher.Average, 50)}, nil)
	if d.CPU.Valid || d.Memory.Valid {
		t.Errorf("other types must be ignored: %+v", d)
	}
}

func TestTrackerInformerAndExpiry(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tr := NewTracker(300*time.Second, cpuEstimate(100), clock)
	h := tr.EventHandler()
	bound := func(name, node string, scheduledAgo time.Duration) *v1.Pod {
		p := lat.Pod(name)
		p.Spec.NodeName = node
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-scheduledAgo))}}
		return p
	}
	view := NodeView{Freshness: Fresh, Updated: now.Add(-5 * time.Second)}

	h.OnAdd(bound("old", "n", time.Hour), true) // running long before startup: not re-counted
	h.OnAdd(bound("new", "n", time.Second), false)
	if got := tr.Unreported("n", view); got.MilliCPU != 100 {
		t.Fatalf("after adds: %+v, want 100m (only the new pod)", got)
	}
	// A bind seen as an update.
	unbound := lat.Pod("bind")
	b := bound("bind", "n", 0)
	h.OnUpdate(unbound, b)
	if got := tr.Unreported("n", view); got.MilliCPU != 200 {
		t.Fatalf("after bind update: %+v", got)
	}
	// Status churn must not re-add a pod Prune dropped.
	tr.Remove(b.UID)
	running := b.DeepCopy()
	running.Status.Phase = v1.PodRunning
	h.OnUpdate(b, running)
	if tr.Len() != 1 {
		t.Fatalf("status update re-added a pod: %d tracked", tr.Len())
	}
	// Terminal and deleted pods stop counting; tombstones are handled.
	done := bound("new", "n", time.Second).DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	h.OnUpdate(bound("new", "n", time.Second), done)
	if tr.Len() != 0 {
		t.Fatalf("succeeded pod still tracked")
	}
	p := bound("gone", "n", 0)
	h.OnAdd(p, false)
	h.OnDelete(cacheTombstone(p))
	if tr.Len() != 0 {
		t.Fatalf("deleted (tombstone) pod still tracked")
	}

	// Upstream watcher (no pod list): time alone says how much of a pod the 15-minute window
	// holds: 70 s and 50 s of it, so 100 × (1 − 70/900) + 100 × (1 − 50/900) = 92 + 94; one placed
	// after the sample counts whole, one placed a window before it not at all.
	tr.Add(lat.Pod("early"), "m", now.Add(-70*time.Second))
	tr.Add(lat.Pod("late"), "m", now.Add(-50*time.Second))
	tr.Add(lat.Pod("after"), "m", now.Add(time.Second))
	tr.Add(lat.Pod("old"), "m", now.Add(-15*time.Minute))
	if got := tr.Unreported("m", NodeView{Freshness: Fresh, Updated: now, Window: 15 * time.Minute}); got.MilliCPU != 92+94+100 {
		t.Errorf("time rule: %+v, want %dm", got, 92+94+100)
	}
	// Expiry bounds everything, pod list or not.
	mu.Lock()
	now = now.Add(302 * time.Second)
	mu.Unlock()
	if got := tr.Unreported("m", NodeView{Freshness: Fresh}); got.MilliCPU != 0 {
		t.Errorf("expired pods still counted: %+v", got)
	}
	// Without a document for the node, a pod may still be about to be reported: Prune keeps it
	// for the expiry plus a window, then drops it.
	tr.Prune(nil, time.Minute)
	if tr.Len() != 3 { // "old" (placed a window before the sample) is past expiry + window; the rest stay
		t.Errorf("Prune dropped pods of a node with no document before expiry + window: %d left", tr.Len())
	}
	mu.Lock()
	now = now.Add(15 * time.Minute)
	mu.Unlock()
	tr.Prune(nil, time.Minute)
	if tr.Len() != 0 {
		t.Errorf("Prune kept %d expired pods", tr.Len())
	}
}

// Pods bound by anyone show up through the framework's informer factory.
func TestEngineRegistersOnInformer(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"n": 10}))
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	e, err := NewEngine(context.Background(), "Test", defaulted(w.URL, nil), &lat.Handle{Factory: factory}, cpuEstimate(250), Options{NoLoop: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Watcher.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	p := lat.Pod("other-scheduler")
	p.Spec.NodeName = "n"
	p.CreationTimestamp = metav1.Now()
	if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.Node("n").Unreported.MilliCPU != 250 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.Node("n").Unreported.MilliCPU; got != 250 {
		t.Fatalf("bound pod from the informer: %dm unreported, want 250m", got)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for e.Node("n").Unreported.MilliCPU != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.Node("n").Unreported.MilliCPU; got != 0 {
		t.Fatalf("deleted pod still counted: %dm", got)
	}
}

// Score-path reads, Reserve/Unreserve and refreshes run concurrently in the scheduler (16
// Score goroutines); -race checks the locking.
func TestConcurrentAccess(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"a": 10, "b": 20}))
	e := newEngine(t, w.URL, nil, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				p := lat.Pod("p" + string(rune('a'+i)) + strings.Repeat("x", j%3))
				e.Reserve(p, "a")
				_ = e.Node("a")
				_ = e.Filter(context.Background(), nil, lat.Node("b", 1000, 1<<30))
				e.Unreserve(p)
			}
		}(i)
	}
	for i := 0; i < 20; i++ {
		_ = e.Watcher.Refresh(context.Background())
	}
	close(stop)
	wg.Wait()
}

func cacheTombstone(p *v1.Pod) interface{} {
	return cache.DeletedFinalStateUnknown{Key: p.Namespace + "/" + p.Name, Obj: p}
}
