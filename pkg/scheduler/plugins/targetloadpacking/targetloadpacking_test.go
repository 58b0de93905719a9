package targetloadpacking

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/plugintest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func rawArgs(s string) runtime.Object {
	return &runtime.Unknown{Raw: []byte(s), ContentType: runtime.ContentTypeJSON}
}

// newPlugin builds a plugin against w without its background loop and loads one snapshot,
// so tests control exactly what Score sees.
func newPlugin(t testing.TB, w *lat.Watcher, extraArgs string, clk *clock) *TargetLoadPacking {
	t.Helper()
	js := fmt.Sprintf(`{"watcherAddress":%q%s}`, w.URL, extraArgs)
	pl, err := NewWithOptions(context.Background(), rawArgs(js), nil, loadaware.Options{Now: clk.Now, NoLoop: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := pl.Engine().Watcher.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	return pl
}

func nodeInfo(n *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	return plugintest.NodeInfoOf(n, pods...)
}

func score(t testing.TB, pl *TargetLoadPacking, pod *v1.Pod, n *v1.Node) int64 {
	t.Helper()
	s, st := pl.Score(context.Background(), framework.NewCycleState(), pod, nodeInfo(n))
	if !st.IsSuccess() {
		t.Fatalf("Score(%s): %v", n.Name, st)
	}
	return s
}

func TestScoreForUtilizationVectors(t *testing.T) {
	// Hand-computed vectors from the reference (T = 40) and the KEP example (T = 50).
	for _, tc := range []struct {
		target, u float64
		want      int64
	}{
		{40, 0, 40}, {40, 10, 55}, {40, 20, 70}, {40, 30, 85}, {40, 40, 100},
		{40, 40.5, 40}, {40, 60, 27}, {40, 80, 13}, {40, 100, 0}, {40, 101, 0},
		{50, 25, 75}, {50, 50, 100}, {50, 75, 25},
		{100, 100, 100}, {100, 100.5, 0},
	} {
		if got := loadaware.RoundScore(ScoreForUtilization(tc.target, tc.u)); got != tc.want {
			t.Errorf("T=%v U=%v: got %d, want %d", tc.target, tc.u, got, tc.want)
		}
	}
}

// Seed 001: three 8-core nodes at 25 %, 50 %, 10 %, target 40 %, a pod with no CPU at all
// (0 request, 0 overhead: a container with an explicit 0 limit) → 77.5, 33.3, 55.
func TestSeedWorkedExample(t *testing.T) {
	want := map[string]float64{"worker-1": 77.5, "worker-2": 100.0 / 3, "worker-3": 55}
	util := map[string]float64{"worker-1": 25, "worker-2": 50, "worker-3": 10}
	for n, u := range util {
		got := ScoreForUtilization(40, PredictedUtilization(u, 8000, 0))
		if math.Abs(got-want[n]) > 1e-9 {
			t.Errorf("%s unrounded: got %v, want %v", n, got, want[n])
		}
	}

	w := lat.NewWatcher()
	defer w.Close()
	clk := &clock{t: time.Now()}
	w.Set(lat.CPUDoc(clk.Now(), util))
	pl := newPlugin(t, w, `,"targetUtilization":40`, clk)
	pod := lat.Pod("zero", 0)
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("0")}
	if p := pl.PredictedMilliCPU(pod); p != 0 {
		t.Fatalf("predicted CPU of the zero pod = %d, want 0", p)
	}
	for n, wantRounded := range map[string]int64{"worker-1": 78, "worker-2": 33, "worker-3": 55} {
		if got := score(t, pl, pod, lat.Node(n, 8000, 32<<30)); got != wantRounded {
			t.Errorf("Score(%s) = %d, want %d", n, got, wantRounded)
		}
	}
}

// Upstream TestTargetLoadPackingScoring: node 1000m/1Gi, T=40, M=1.5.
func TestUpstreamScoringVectors(t *testing.T) {
	full := lat.Pod("full", 1000)
	full.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000m")}
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		metrics []watcher.Metric
		want    int64
	}{
		{"new node", lat.Pod("empty"), []watcher.Metric{lat.Metric(watcher.CPU, watcher.Latest, 0)}, 40},
		{"hot node", lat.Pod("empty"), []watcher.Metric{lat.Metric(watcher.CPU, watcher.Latest, 50)}, 33},
		{"excess utilization", full, []watcher.Metric{lat.Metric(watcher.CPU, watcher.Latest, 30)}, 0},
		// Upstream gives 0 here; Berth gives the neutral score (default 50).
		{"no metrics for node", lat.Pod("empty"), nil, loadaware.DefaultNeutralScore},
		// Only memory (upstream issue #702): CPU missing → neutral, not 0.
		{"memory only", lat.Pod("empty"), []watcher.Metric{lat.Metric(watcher.Memory, watcher.Average, 10)}, loadaware.DefaultNeutralScore},
		// The last CPU AVG/Latest in list order wins, as upstream.
		{"last cpu metric wins", lat.Pod("empty"), []watcher.Metric{
			lat.Metric(watcher.CPU, watcher.Average, 90), lat.Metric(watcher.CPU, watcher.Std, 5), lat.Metric(watcher.CPU, watcher.Latest, 0)}, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := lat.NewWatcher()
			defer w.Close()
			clk := &clock{t: time.Now()}
			nodes := map[string][]watcher.Metric{"other": {lat.Metric(watcher.CPU, watcher.Latest, 1)}}
			if tc.metrics != nil {
				nodes["node-1"] = tc.metrics
			}
			w.Set(lat.Doc(clk.Now(), nodes))
			pl := newPlugin(t, w, "", clk)
			if got := score(t, pl, tc.pod, lat.Node("node-1", 1000, 1<<30)); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// varianceMargin adds that many deviations of the node's CPU window to the prediction; 0 (the
// default) is upstream's score whatever the deviation, and a node without a deviation metric
// keeps its upstream score under any margin.
func TestVarianceMargin(t *testing.T) {
	avgStd := func(avg, std float64) []watcher.Metric {
		return []watcher.Metric{lat.Metric(watcher.CPU, watcher.Average, avg), lat.Metric(watcher.CPU, watcher.Std, std)}
	}
	for _, tc := range []struct {
		name    string
		args    string
		metrics []watcher.Metric
		// The empty pod on a 1000m node at target 60: U ≤ 60 scores 40·U/60 + 60, above
		// 60·(100−U)/40.
		want         int64
		wantHeadroom float64
	}{
		{"default margin is upstream", ``, avgStd(30, 10), 80, 0},
		{"explicit 0 is upstream", `,"varianceMargin":"0"`, avgStd(30, 10), 80, 0},
		{"one deviation", `,"varianceMargin":"1"`, avgStd(30, 10), 87, 10},
		{"two deviations", `,"varianceMargin":"2"`, avgStd(30, 10), 93, 20},
		{"three deviations reach the target", `,"varianceMargin":"3"`, avgStd(30, 10), 100, 30},
		{"four deviations pass it", `,"varianceMargin":"4"`, avgStd(30, 10), 45, 40},
		{"steady node packs to the target", `,"varianceMargin":"3"`, avgStd(60, 0), 100, 0},
		{"no deviation metric", `,"varianceMargin":"3"`, []watcher.Metric{lat.Metric(watcher.CPU, watcher.Average, 30)}, 80, 0},
		{"past full load", `,"varianceMargin":"10"`, avgStd(50, 10), 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := lat.NewWatcher()
			defer w.Close()
			clk := &clock{t: time.Now()}
			w.Set(lat.Doc(clk.Now(), map[string][]watcher.Metric{"node-1": tc.metrics}))
			pl := newPlugin(t, w, `,"targetUtilization":60`+tc.args, clk)
			pod := lat.Pod("empty")
			n := lat.Node("node-1", 1000, 1<<30)
			if got := score(t, pl, pod, n); got != tc.want {
				t.Errorf("score %d, want %d", got, tc.want)
			}
			d, _ := pl.ExplainScore(context.Background(), framework.NewCycleState(), pod, nodeInfo(n)).(decisionapi.LoadDetail)
			if math.Abs(d.HeadroomPercent-tc.wantHeadroom) > 1e-9 {
				t.Errorf("decision record headroom %v, want %v", d.HeadroomPercent, tc.wantHeadroom)
			}
		})
	}
}

// Upstream integration scenario (2-core nodes at 10/60/0 %): pod-1 (300m) then pod-2 (100m)
// with pod-1 reserved on node-1 in between; derived scores 89/12/74 then 100/22/51.
func TestIntegrationScenarioWithReserve(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	clk := &clock{t: time.Now()}
	w.Set(lat.CPUDoc(clk.Now(), map[string]float64{"node-1": 10, "node-2": 60, "node-3": 0}))
	pl := newPlugin(t, w, "", clk)
	nodes := []*v1.Node{lat.Node("node-1", 2000, 1<<30), lat.Node("node-2", 2000, 1<<30), lat.Node("node-3", 2000, 1<<30)}
	check := func(pod *v1.Pod, want []int64) {
		t.Helper()
		for i, n := range nodes {
			if got := score(t, pl, pod, n); got != want[i] {
				t.Errorf("%s on %s: got %d, want %d", pod.Name, n.Name, got, want[i])
			}
		}
	}
	pod1, pod2 := lat.Pod("pod-1", 300), lat.Pod("pod-2", 100)
	check(pod1, []int64{89, 12, 74})
	if st := pl.Reserve(context.Background(), framework.NewCycleState(), pod1, "node-1"); !st.IsSuccess() {
		t.Fatal(st)
	}
	check(pod2, []int64{100, 22, 51})
	// Unreserve must take pod-1's load away again.
	pl.Unreserve(context.Background(), framework.NewCycleState(), pod1, "node-1")
	// Back to the snapshot alone: U = 10 + 150m/2000m = 17.5 % → 66.25.
	if got := score(t, pl, pod2, nodes[0]); got != 66 {
		t.Errorf("after Unreserve: got %d, want 66", got)
	}
}

func TestPredictedMilliCPU(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"n": 0}))
	pl := newPlugin(t, w, `,"defaultRequests":{"cpu":"250m"},"defaultRequestsMultiplier":"2"`, &clock{t: time.Now()})

	limited := lat.Pod("limited", 100)
	limited.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("700m")}
	always := v1.ContainerRestartPolicyAlways
	withInit := lat.Pod("init", 100)
	withInit.Spec.InitContainers = []v1.Container{
		{Name: "sidecar", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m")}}},
		{Name: "once", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}}},
	}
	withOverhead := lat.Pod("overhead", 0)
	withOverhead.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}
	for _, tc := range []struct {
		pod  *v1.Pod
		want int64
	}{
		{lat.Pod("req", 333), 666},          // request × 2
		{limited, 700},                      // limit wins over request
		{lat.Pod("none", 0), 250},           // neither → defaultRequests.cpu
		{lat.Pod("two", 100, 0), 200 + 250}, // per container
		{withInit, 200 + 100},               // sidecar counts, plain init does not
		{withOverhead, 250 + 10},            // overhead added
		{lat.Pod("nocontainers"), 0},
	} {
		if got := pl.PredictedMilliCPU(tc.pod); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.pod.Name, got, tc.want)
		}
	}
}

// Two profiles with different targets must not share state (upstream keeps TLP args in
// package globals, so the last one created wins for both).
func TestTwoProfilesSideBySide(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	clk := &clock{t: time.Now()}
	w.Set(lat.CPUDoc(clk.Now(), map[string]float64{"n": 50}))
	node := lat.Node("n", 1000, 1<<30)
	pod := lat.Pod("empty")
	low := newPlugin(t, w, `,"targetUtilization":40`, clk)
	before := score(t, low, pod, node)
	high := newPlugin(t, w, `,"targetUtilization":80,"defaultRequestsMultiplier":"3"`, clk)
	if got := score(t, low, pod, node); got != before || got != 33 {
		t.Errorf("T=40 profile after creating T=80 one: got %d (before %d), want 33", got, before)
	}
	if got := score(t, high, pod, node); got != 93 { // (100-80)·50/80 + 80 = 92.5
		t.Errorf("T=80 profile: got %d, want 93", got)
	}
	// Reserving in one profile's instance must not change the other's accounting.
	p := lat.Pod("p", 100)
	if st := high.Reserve(context.Background(), nil, p, "n"); !st.IsSuccess() {
		t.Fatal(st)
	}
	if got := score(t, low, pod, node); got != 33 {
		t.Errorf("T=40 profile after a Reserve in the other: got %d, want 33", got)
	}
	if low.PredictedMilliCPU(p) != 150 || high.PredictedMilliCPU(p) != 300 {
		t.Errorf("multipliers leaked: low %d high %d", low.PredictedMilliCPU(p), high.PredictedMilliCPU(p))
	}
}

// A burst of 20 pods scheduled back to back (Score all nodes, pick best, Reserve) must spread
// over the nodes instead of all landing on the one that looked best in the snapshot.
func TestBurstSpreads(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	clk := &clock{t: time.Now()}
	w.Set(lat.CPUDoc(clk.Now(), map[string]float64{"a": 10, "b": 20, "c": 30}))
	nodes := []*v1.Node{lat.Node("a", 8000, 32<<30), lat.Node("b", 8000, 32<<30), lat.Node("c", 8000, 32<<30)}

	run := func(pl *TargetLoadPacking, reserve bool) map[string]int {
		placed := map[string]int{}
		for i := 0; i < 20; i++ {
			pod := lat.Pod(fmt.Sprintf("burst-%d", i), 500)
			best, bestScore := "", int64(-1)
			for _, n := range nodes {
				if s := score(t, pl, pod, n); s > bestScore {
					best, bestScore = n.Name, s
				}
			}
			placed[best]++
			if reserve {
				if st := pl.Reserve(context.Background(), nil, pod, best); !st.IsSuccess() {
					t.Fatal(st)
				}
			}
		}
		return placed
	}
	// Control: without the accounting every pod sees the same snapshot → one node takes all.
	if placed := run(newPlugin(t, w, "", clk), false); len(placed) != 1 {
		t.Fatalf("control run without Reserve spread anyway (%v): the scenario does not test anything", placed)
	}
	placed := run(newPlugin(t, w, "", clk), true)
	if len(placed) < 2 {
		t.Fatalf("burst piled onto one node: %v", placed)
	}
	for n, c := range placed {
		if c > 12 {
			t.Errorf("node %s took %d of 20 pods: %v", n, c, placed)
		}
	}
}

func TestStaleExpiredMissingMetrics(t *testing.T) {
	clk := &clock{t: time.Now()}
	now := clk.Now()
	doc := lat.CPUDoc(now, map[string]float64{"fresh": 20, "old": 20, "flagged": 20})
	doc.Nodes = map[string]loadapi.NodeStatus{
		"fresh":   {Updated: now.Unix()},
		"old":     {Updated: now.Add(-301 * time.Second).Unix()},
		"flagged": {Updated: now.Unix(), Stale: true},
	}
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(doc)
	pod := lat.Pod("empty")
	for _, tc := range []struct {
		args string
		want map[string]int64
	}{
		{"", map[string]int64{"fresh": 70, "old": 50, "flagged": 50, "absent": 50}},
		{`,"neutralScore":0`, map[string]int64{"fresh": 70, "old": 0, "flagged": 0, "absent": 0}},
		{`,"metricsExpirySeconds":600`, map[string]int64{"fresh": 70, "old": 70, "flagged": 50, "absent": 50}},
	} {
		pl := newPlugin(t, w, tc.args, clk)
		for n, want := range tc.want {
			if got := score(t, pl, pod, lat.Node(n, 1000, 1<<30)); got != want {
				t.Errorf("args %q node %s: got %d, want %d", tc.args, n, got, want)
			}
		}
	}

	// Time passing makes a fresh snapshot expire without any new fetch.
	pl := newPlugin(t, w, "", clk)
	clk.Add(301 * time.Second)
	if got := score(t, pl, pod, lat.Node("fresh", 1000, 1<<30)); got != 50 {
		t.Errorf("after 301 s without refresh: got %d, want neutral 50", got)
	}
}

func TestFilterBlockAndThresholds(t *testing.T) {
	clk := &clock{t: time.Now()}
	now := clk.Now()
	doc := lat.Doc(now, map[string][]watcher.Metric{
		"hot":  {lat.Metric(watcher.CPU, watcher.Average, 85), lat.Metric(watcher.Memory, watcher.Average, 50)},
		"cool": {lat.Metric(watcher.CPU, watcher.Average, 20), lat.Metric(watcher.Memory, watcher.Average, 95)},
		"old":  {lat.Metric(watcher.CPU, watcher.Average, 20)},
	})
	doc.Nodes = map[string]loadapi.NodeStatus{"old": {Updated: now.Add(-time.Hour).Unix()}}
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(doc)
	// The incoming pod counts in the Filter: a 1m pod barely.
	filterPod := func(pl *TargetLoadPacking, p *v1.Pod, n *v1.Node) bool {
		return pl.Filter(context.Background(), nil, p, nodeInfo(n)).IsSuccess()
	}
	filter := func(pl *TargetLoadPacking, n *v1.Node) bool { return filterPod(pl, lat.Pod("p", 1), n) }
	node := func(name string, ann map[string]string) *v1.Node {
		n := lat.Node(name, 1000, 1<<30)
		n.Annotations = ann
		return n
	}

	def := newPlugin(t, w, "", clk)
	for _, n := range []string{"hot", "cool", "old", "absent"} {
		if !filter(def, node(n, nil)) {
			t.Errorf("default args filtered out %s; the filter must be off by default", n)
		}
	}

	thr := newPlugin(t, w, `,"usageThresholds":{"cpu":80,"memory":90}`, clk)
	for _, tc := range []struct {
		node *v1.Node
		want bool
	}{
		{node("hot", nil), false},
		{node("cool", nil), false}, // memory 95 > 90
		{node("hot", map[string]string{"berth.io/cpu-usage-threshold": "90"}), true},
		{node("hot", map[string]string{"berth.io/cpu-usage-threshold": "bogus"}), false}, // ignored
		{node("cool", map[string]string{"berth.io/memory-usage-threshold": "96%"}), true},
		{node("old", nil), true},    // expired → Neutral policy lets it through
		{node("absent", nil), true}, // missing → same
	} {
		if got := filter(thr, tc.node); got != tc.want {
			t.Errorf("thresholds, node %s %v: pass=%v, want %v", tc.node.Name, tc.node.Annotations, got, tc.want)
		}
	}

	// Unreported placed pods count toward usage: 20 % + 700m/1000m = 90 % > 80 %.
	thr2 := newPlugin(t, w, `,"usageThresholds":{"cpu":80}`, clk)
	big := lat.Pod("big", 0)
	big.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("700m")}
	if !filter(thr2, node("cool", nil)) {
		t.Fatal("cool node filtered before any placement")
	}
	// The incoming pod itself counts: 20 % + 700m/1000m = 90 % > 80 %.
	if filterPod(thr2, big, node("cool", nil)) {
		t.Error("cool node passes a pod that takes it over the threshold by itself")
	}
	thr2.Reserve(context.Background(), nil, big, "cool")
	if filter(thr2, node("cool", nil)) {
		t.Error("cool node still passes after a reserved pod pushed it over the threshold")
	}

	block := newPlugin(t, w, `,"expiredMetricsAction":"Block"`, clk)
	for n, want := range map[string]bool{"hot": true, "cool": true, "old": false, "absent": false} {
		if got := filter(block, node(n, nil)); got != want {
			t.Errorf("Block, node %s: pass=%v, want %v", n, got, want)
		}
	}
	// When every node is expired the watcher is down as a whole: Block must not stop
	// scheduling.
	clk.Add(2 * time.Hour)
	for _, n := range []string{"hot", "old", "absent"} {
		if !filter(block, node(n, nil)) {
			t.Errorf("Block with the whole signal dead filtered %s", n)
		}
	}
}

// A placed pod counts what of its estimate the scored window does not hold yet: all of it while
// the agent does not list it, then estimate − its window share with per-pod usage, estimate ×
// (1 − covered/window) without, and nothing once the window has held it for its whole length.
func TestPlacedPodsCountUntilTheWindowHoldsThem(t *testing.T) {
	clk := &clock{t: time.Now()}
	w := lat.NewWatcher()
	defer w.Close()
	doc := func(listed bool, pods []loadapi.PodUsage) *loadapi.Response {
		d := lat.CPUDoc(clk.Now(), map[string]float64{"n": 10})
		uids := []string{"uid-agent"}
		if listed {
			uids = append(uids, "uid-placed")
		}
		d.Nodes = map[string]loadapi.NodeStatus{"n": {Updated: clk.Now().Unix(), PodUIDs: uids, Pods: pods}}
		return d
	}
	w.Set(doc(false, nil))
	pl := newPlugin(t, w, "", clk)
	if q := w.Query(); q.Get(loadapi.PodsQuery) != "true" {
		t.Errorf("watcher query = %v, want %s=true", q, loadapi.PodsQuery)
	}
	node, probe := lat.Node("n", 1000, 1<<30), lat.Pod("probe")
	base := score(t, pl, probe, node)
	placed := lat.Pod("placed", 100) // 150m predicted
	pl.Reserve(context.Background(), nil, placed, "n")
	withPlaced := score(t, pl, probe, node)
	if withPlaced == base {
		t.Fatalf("reserved pod did not change the score (%d)", base)
	}
	remaining := func() int64 { return pl.Engine().NodeOf(node).Unreported.MilliCPU }
	steps := []struct {
		name  string
		after time.Duration // since the pod was placed
		doc   *loadapi.Response
		want  int64
	}{
		{"not listed: all of it, however long", 2 * time.Minute, nil, 150},
		{"listed, no per-pod usage: time rule", 3 * time.Minute, nil, 120},                // 150 × (1 − 3/15)
		{"measured: its use now − its window share", 4 * time.Minute, nil, 110},           // 15 % − 4 % of 1000m
		{"measured above the estimate: the measurement", 4 * time.Minute, nil, 250},       // 30 % − 5 %
		{"window share above its use now: nothing, no negative", 5 * time.Minute, nil, 0}, // 10 % − 20 %
		{"usage for another window only: time rule", 6 * time.Minute, nil, 90},
		{"window holds it whole", 15*time.Minute + 5*time.Second, nil, 0},
	}
	steps[0].doc = doc(false, nil)
	steps[1].doc = doc(true, nil)
	usage := func(latest float64, w string, held float64) []loadapi.PodUsage {
		return []loadapi.PodUsage{{UID: "uid-placed", Latest: loadapi.Latest{CPU: latest}, Windows: []loadapi.PodWindow{{Window: w, CPU: held}}}}
	}
	steps[2].doc = doc(true, usage(15, "15m", 4))
	steps[3].doc = doc(true, usage(30, "15m", 5))
	steps[4].doc = doc(true, usage(10, "15m", 20))
	steps[5].doc = doc(true, usage(20, "5m", 20))
	steps[6].doc = doc(true, usage(20, "15m", 1))
	for _, st := range steps {
		// The fake watcher's Date header is the real clock, against which the scheduler rebases
		// sample times: the samples stay "now" and the pod is placed st.after before them.
		clk.Set(time.Now())
		tr := pl.Engine().Tracker
		tr.Remove(placed.UID)
		tr.Add(placed, "n", clk.Now().Add(-st.after))
		st.doc.Timestamp = clk.Now().Unix()
		st.doc.Nodes["n"] = loadapi.NodeStatus{Updated: clk.Now().Unix(), PodUIDs: st.doc.Nodes["n"].PodUIDs, Pods: st.doc.Nodes["n"].Pods}
		w.Set(st.doc)
		if err := pl.Engine().Watcher.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		// ±1m: the document's times are whole seconds (a second is 0.17m of this pod).
		if got := remaining(); got < st.want-1 || got > st.want+1 {
			t.Errorf("%s: remaining %dm, want %dm", st.name, got, st.want)
		}
	}
	if got := score(t, pl, probe, node); got != base {
		t.Errorf("pod held by the window still counted: got %d, want %d", got, base)
	}
	if n := pl.Engine().Tracker.Len(); n != 0 {
		t.Errorf("tracker kept %d pods after the window held them", n)
	}
}

// A node's usage of a pod it does not list is not subtracted from anything: a usage entry
// naming another node's pod changes nothing.
func TestPodShareOfAnotherNodeIsIgnored(t *testing.T) {
	clk := &clock{t: time.Now()}
	w := lat.NewWatcher()
	defer w.Close()
	d := lat.CPUDoc(clk.Now(), map[string]float64{"a": 10, "b": 10})
	d.Nodes = map[string]loadapi.NodeStatus{
		"a": {Updated: clk.Now().Unix(), PodUIDs: []string{"x"}},
		// b claims usage for a's pod without listing it, and lists it with usage too.
		"b": {Updated: clk.Now().Unix(), PodUIDs: []string{"uid-placed"}, Pods: []loadapi.PodUsage{{UID: "uid-placed", Latest: loadapi.Latest{CPU: 1}, Windows: []loadapi.PodWindow{{Window: "15m", CPU: 15}}}}},
	}
	w.Set(d)
	pl := newPlugin(t, w, "", clk)
	pl.Reserve(context.Background(), nil, lat.Pod("placed", 100), "a")
	if got := pl.Engine().NodeOf(lat.Node("a", 1000, 1<<30)).Unreported.MilliCPU; got != 150 {
		t.Fatalf("node a counts %dm for its placed pod, want all 150m: b's report must not reduce it", got)
	}
}

func TestArgs(t *testing.T) {
	got, err := ParseArgs(rawArgs(`{"watcherAddress":"http://lw:2020/"}`))
	if err != nil {
		t.Fatal(err)
	}
	cpu := got.DefaultRequests[v1.ResourceCPU]
	if *got.TargetUtilization != 40 || cpu.MilliValue() != 1000 || *got.DefaultRequestsMultiplier != "1.5" ||
		got.WatcherAddress != "http://lw:2020" || *got.MetricsExpirySeconds != 300 || *got.RefreshIntervalSeconds != 30 ||
		got.ExpiredMetricsAction != loadaware.ExpiredMetricsNeutral || *got.NeutralScore != 50 || got.UsageThresholds != nil {
		t.Errorf("defaults: %+v", got)
	}
	// Upstream defaults_test vector: explicit values stay as they are.
	got, err = ParseArgs(rawArgs(`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"TargetLoadPackingArgs","watcherAddress":"http://localhost:2020","defaultRequests":{"cpu":"100m"},"defaultRequestsMultiplier":"2.5","targetUtilization":50}`))
	if err != nil {
		t.Fatal(err)
	}
	cpu = got.DefaultRequests[v1.ResourceCPU]
	if *got.TargetUtilization != 50 || cpu.MilliValue() != 100 || *got.DefaultRequestsMultiplier != "2.5" || got.MetricProvider != nil {
		t.Errorf("explicit values changed: %+v", got)
	}
	// YAML, as a hand-written runtime.Unknown might carry.
	if _, err := ParseArgs(&runtime.Unknown{ContentType: runtime.ContentTypeYAML, Raw: []byte("watcherAddress: http://lw:2020\ntargetUtilization: 70\n")}); err != nil {
		t.Errorf("YAML args: %v", err)
	}
	// Typed args are copied, not aliased.
	typed := &TargetLoadPackingArgs{LoadAwareArgs: loadaware.CommonArgs{WatcherAddress: "http://lw:2020"}}
	if out, err := ParseArgs(typed); err != nil || out == typed || typed.TargetUtilization != nil {
		t.Errorf("typed args: err %v, aliased %v, input mutated %v", err, out == typed, typed.TargetUtilization != nil)
	}

	for _, tc := range []struct{ args, wantField string }{
		{`{"watcherAddress":"http://lw","targetUtilisation":50}`, `unknown field "targetUtilisation"`},
		{`{"watcherAddress":"http://lw","TargetUtilization":50}`, `unknown field "TargetUtilization"`},
		{`{"watcherAddress":"http://lw","targetUtilization":0}`, "targetUtilization"},
		{`{"watcherAddress":"http://lw","targetUtilization":101}`, "targetUtilization"},
		{`{"watcherAddress":"http://lw","defaultRequestsMultiplier":"abc"}`, "defaultRequestsMultiplier"},
		{`{"watcherAddress":"http://lw","defaultRequestsMultiplier":"-1"}`, "defaultRequestsMultiplier"},
		{`{"watcherAddress":"http://lw","defaultRequestsMultiplier":1.5}`, "defaultRequestsMultiplier"},
		{`{"watcherAddress":"http://lw","defaultRequests":{"cpu":"-1"}}`, "defaultRequests[cpu]"},
		{`{"watcherAddress":"http://lw","varianceMargin":"-1"}`, "varianceMargin"},
		{`{"watcherAddress":"http://lw","varianceMargin":"11"}`, "varianceMargin"},
		{`{"watcherAddress":"http://lw","varianceMargin":"NaN"}`, "varianceMargin"},
		{`{"watcherAddress":"http://lw","varianceMargin":"two"}`, "varianceMargin"},
		{`{}`, "watcherAddress"},
		{`{"metricProvider":{"type":"Prometheus","address":"http://prom:9090"}}`, "watcherAddress"},
		{`{"watcherAddress":"lw:2020"}`, "watcherAddress"},
		{`{"watcherAddress":"http://lw","metricProvider":{"type":"Graphite"}}`, "metricProvider.type"},
		{`{"watcherAddress":"http://lw","metricsExpirySeconds":0}`, "metricsExpirySeconds"},
		{`{"watcherAddress":"http://lw","refreshIntervalSeconds":-5}`, "refreshIntervalSeconds"},
		{`{"watcherAddress":"http://lw","watcherTimeoutSeconds":0}`, "watcherTimeoutSeconds"},
		{`{"watcherAddress":"http://lw","assumedPodExpirySeconds":0}`, "assumedPodExpirySeconds"},
		{`{"watcherAddress":"http://lw","neutralScore":101}`, "neutralScore"},
		{`{"watcherAddress":"http://lw","estimateSeconds":-1}`, "estimateSeconds"},
		{`{"watcherAddress":"http://lw","estimateSeconds":86401}`, "estimateSeconds"},
		{`{"watcherAddress":"http://lw","podEstimateSecondsLimit":-1}`, "podEstimateSecondsLimit"},
		{`{"watcherAddress":"http://lw","podEstimateSecondsLimit":"600"}`, "podEstimateSecondsLimit"},
		{`{"watcherAddress":"http://lw","expiredMetricsAction":"Panic"}`, "expiredMetricsAction"},
		{`{"watcherAddress":"http://lw","usageThresholds":{"gpu":50}}`, "usageThresholds[gpu]"},
		{`{"watcherAddress":"http://lw","usageThresholds":{"cpu":150}}`, "usageThresholds[cpu]"},
		{`{"watcherAddress":"http://lw","kind":"LoadVariationRiskBalancingArgs"}`, "kind"},
		{`{"watcherAddress":"http://lw","targetUtilization":40,"targetUtilization":50}`, `duplicate field "targetUtilization"`},
	} {
		_, err := ParseArgs(rawArgs(tc.args))
		if err == nil || !strings.Contains(err.Error(), tc.wantField) {
			t.Errorf("%s: error %v, want one naming %q", tc.args, err, tc.wantField)
		}
		// The factory refuses the same args, so the scheduler does not start.
		if _, ferr := New(context.Background(), rawArgs(tc.args), nil); ferr == nil {
			t.Errorf("%s: New accepted args ParseArgs rejects", tc.args)
		}
	}
}

func TestPreScoreMatchesFallback(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"n": 25}))
	pl := newPlugin(t, w, "", &clock{t: time.Now()})
	ni := framework.NewNodeInfo()
	ni.SetNode(lat.Node("n", 8000, 1<<30))
	pod := lat.Pod("p", 1000)
	state := framework.NewCycleState()
	if st := pl.PreScore(context.Background(), state, pod, nil); !st.IsSuccess() {
		t.Fatal(st)
	}
	with, _ := pl.Score(context.Background(), state, pod, ni)
	without, _ := pl.Score(context.Background(), framework.NewCycleState(), pod, ni)
	// 25 % of 8 cores + 1000m × 1.5 = 3500m of 8000m = 43.75 % → 40·56.25/60 = 37.5 → 38.
	if with != without || with != 38 {
		t.Errorf("with PreScore %d, without %d, want 38", with, without)
	}
}

// A third-party or upstream watcher serving utilisation outside [0,100] % once produced −13 and
// −1 499 938 with a success status; the plugin clamps what it reads, so scores stay in range.
func TestOutOfRangeUtilisationScoresInRange(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	clk := &clock{t: time.Now()}
	util := map[string]float64{"neg": -35.3, "huge-neg": -999_985, "over": 250, "ok": 25}
	w.Set(lat.CPUDoc(clk.Now(), util))
	pl := newPlugin(t, w, `,"targetUtilization":40`, clk)
	pod := lat.Pod("zero", 0)
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("0")}
	// Clamped to 0 % a node scores the target (40), clamped to 100 % it scores 0.
	want := map[string]int64{"neg": 40, "huge-neg": 40, "over": 0, "ok": 78}
	for n, w := range want {
		if got := score(t, pl, pod, lat.Node(n, 8000, 32<<30)); got != w {
			t.Errorf("Score(%s at %v %%) = %d, want %d", n, util[n], got, w)
		}
	}
	if got := pl.Engine().Watcher.Snapshot().OutOfRange; got != 3 {
		t.Errorf("snapshot counted %d out-of-range values, want 3", got)
	}
}

// A slow starter's low first measurements do not let its node be packed on: in its estimate
// window (estimateSeconds, or the pod's berth.dev/estimate-seconds within
// podEstimateSecondsLimit) a measured pod counts at least its estimate, less what the window
// already holds of it, even once the window has held it whole; after the window, what it uses.
func TestEstimateWindowKeepsSlowStartersCounted(t *testing.T) {
	const (
		lowUse  = 2.0 // % of the node's 1000m now: a JVM warming up
		held    = 1.0 // % the 15-minute window holds of it
		highUse = 30.0
	)
	for _, tc := range []struct {
		name       string
		args       string
		annotation string // "": none
		after      time.Duration
		use        float64
		window     string
		want       int64 // remaining milli-CPU; the estimate is 150m
	}{
		// First: run alone, it is the process's first plugin, whose counter is registered late.
		{name: "malformed annotation: the default", args: `,"estimateSeconds":600,"podEstimateSecondsLimit":1200`, annotation: "10m", after: 4 * time.Minute, use: lowUse, window: "15m", want: 140},
		{name: "off (default): what it uses", after: 4 * time.Minute, use: lowUse, window: "15m", want: 10},
		{name: "in the window: at least the estimate", args: `,"estimateSeconds":600`, after: 4 * time.Minute, use: lowUse, window: "15m", want: 140},
		{name: "in the window, using more than the estimate: its use", args: `,"estimateSeconds":600`, after: 4 * time.Minute, use: highUse, window: "15m", want: 290},
		{name: "after the window: what it uses", args: `,"estimateSeconds":600`, after: 11 * time.Minute, use: lowUse, window: "15m", want: 10},
		{name: "held whole by the scored window but still in its estimate window", args: `,"estimateSeconds":1200`, after: 16 * time.Minute, use: lowUse, window: "15m", want: 140},
		{name: "annotation longer than the default", args: `,"estimateSeconds":600,"podEstimateSecondsLimit":1200`, annotation: "1200", after: 11 * time.Minute, use: lowUse, window: "15m", want: 140},
		{name: "annotation shorter than the default", args: `,"estimateSeconds":600,"podEstimateSecondsLimit":1200`, annotation: "60", after: 4 * time.Minute, use: lowUse, window: "15m", want: 10},
		{name: "annotation capped at the limit", args: `,"podEstimateSecondsLimit":600`, annotation: "86400", after: 11 * time.Minute, use: lowUse, window: "15m", want: 10},
		{name: "annotation within the limit", args: `,"podEstimateSecondsLimit":600`, annotation: "86400", after: 9 * time.Minute, use: lowUse, window: "15m", want: 140},
		{name: "annotation ignored without a limit", args: `,"estimateSeconds":60`, annotation: "1200", after: 4 * time.Minute, use: lowUse, window: "15m", want: 10},
		{name: "negative annotation: the default", args: `,"podEstimateSecondsLimit":1200`, annotation: "-5", after: 4 * time.Minute, use: lowUse, window: "15m", want: 10},
		{name: "not measured: the time rule as before", args: `,"estimateSeconds":1200`, after: 3 * time.Minute, window: "", want: 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: time.Now()}
			w := lat.NewWatcher()
			defer w.Close()
			doc := lat.CPUDoc(clk.Now(), map[string]float64{"n": 10})
			var pods []loadapi.PodUsage
			if tc.window != "" {
				pods = []loadapi.PodUsage{{UID: "uid-placed", Latest: loadapi.Latest{CPU: tc.use}, Windows: []loadapi.PodWindow{{Window: tc.window, CPU: held}}}}
			}
			doc.Nodes = map[string]loadapi.NodeStatus{"n": {Updated: clk.Now().Unix(), PodUIDs: []string{"uid-placed"}, Pods: pods}}
			w.Set(doc)
			pl := newPlugin(t, w, tc.args, clk)
			placed := lat.Pod("placed", 100) // 150m predicted
			if tc.annotation != "" {
				placed.Annotations = map[string]string{configv1.EstimateSecondsAnnotation: tc.annotation}
			}
			before := annotationsIgnored(t)
			// Placed twice (Reserve, then the bind event): counted once.
			pl.Engine().Tracker.Add(placed, "n", clk.Now().Add(-tc.after))
			pl.Engine().Tracker.Add(placed, "n", clk.Now().Add(-tc.after))
			// ±1m: the document's times are whole seconds. A refresh prunes what no longer
			// counts: it must keep a pod in its estimate window.
			// Held at its estimate, as the decision record says, exactly where the window is
			// what counts it: measured and counted above what it uses now.
			held := tc.window != "" && tc.want > 10
			for _, when := range []string{"placed", "after a refresh"} {
				st := pl.Engine().NodeOf(lat.Node("n", 1000, 1<<30))
				if got := st.Unreported.MilliCPU; got < tc.want-1 || got > tc.want+1 {
					t.Errorf("%s: remaining %dm, want %dm", when, got, tc.want)
				}
				if got, want := st.HeldAtEstimate.MilliCPU, map[bool]int64{true: st.Unreported.MilliCPU}[held]; got != want {
					t.Errorf("%s: held at estimate %dm, want %dm", when, got, want)
				}
				if err := pl.Engine().Watcher.Refresh(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			malformed := tc.annotation == "10m" || tc.annotation == "-5"
			if d := annotationsIgnored(t) - before; d != map[bool]float64{true: 1, false: 0}[malformed] {
				t.Errorf("berth_loadaware_estimate_annotations_ignored_total moved by %v", d)
			}
		})
	}
}

// annotationsIgnored reads TargetLoadPacking's berth_loadaware_estimate_annotations_ignored_total
// from the registry the scheduler serves on /metrics.
func annotationsIgnored(t *testing.T) float64 {
	t.Helper()
	fams, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "berth_loadaware_estimate_annotations_ignored_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "plugin" && l.GetValue() == Name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// Nodes that tie at the top on the rounded score: the one with the highest unrounded score
// keeps it, the others lose a point, so the framework does not pick at random. Under the
// target that is the fuller node (packing), past it the emptier one; nodes not tied at the top
// and nodes whose unrounded scores are equal keep their scores.
func TestNormalizeScoreBreaksTopTies(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	clk := &clock{t: time.Now()}
	// At target 60 one score point is 1.5 points of utilisation: 10.0 and 10.6 % both round to
	// 67 with a 0m pod; 70.0 and 70.3 % to 45; 40 % scores 87.
	w.Set(lat.CPUDoc(clk.Now(), map[string]float64{"low": 10, "lowish": 10.6, "busy": 40, "over": 70, "overish": 70.3, "twin": 10.6}))
	nodes := map[string]*v1.Node{}
	var all []*v1.Node
	for _, n := range []string{"low", "lowish", "busy", "over", "overish", "twin"} {
		nodes[n] = lat.Node(n, 8000, 32<<30)
		all = append(all, nodes[n])
	}
	pl := newPlugin(t, w, `,"targetUtilization":60,"defaultRequests":{"cpu":"0"}`, clk)
	pl.nodes = cache.NewSnapshot(nil, all).NodeInfos()
	pod := lat.Pod("p", 0)
	for _, tc := range []struct {
		name  string
		nodes []string
		want  map[string]int64
	}{
		{"under the target: the fuller keeps it", []string{"low", "lowish", "over"}, map[string]int64{"low": 66, "lowish": 67, "over": 45}},
		{"past the target: the emptier keeps it", []string{"over", "overish"}, map[string]int64{"over": 45, "overish": 44}},
		{"no tie at the top: unchanged", []string{"low", "busy", "over", "overish"}, map[string]int64{"low": 67, "busy": 87, "over": 45, "overish": 45}},
		{"equal unrounded scores stay tied", []string{"lowish", "twin"}, map[string]int64{"lowish": 67, "twin": 67}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var list fwk.NodeScoreList
			for _, n := range tc.nodes {
				list = append(list, fwk.NodeScore{Name: n, Score: score(t, pl, pod, nodes[n])})
			}
			if st := pl.NormalizeScore(context.Background(), framework.NewCycleState(), pod, list); !st.IsSuccess() {
				t.Fatal(st)
			}
			for _, s := range list {
				if s.Score != tc.want[s.Name] {
					t.Errorf("%s scored %d, want %d (all: %v)", s.Name, s.Score, tc.want[s.Name], list)
				}
			}
		})
	}
}
