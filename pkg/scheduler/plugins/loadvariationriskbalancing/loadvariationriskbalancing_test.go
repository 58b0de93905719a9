package loadvariationriskbalancing

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

func rawArgs(s string) runtime.Object {
	return &runtime.Unknown{Raw: []byte(s), ContentType: runtime.ContentTypeJSON}
}

func newPlugin(t testing.TB, w *lat.Watcher, extraArgs string, now func() time.Time) *LoadVariationRiskBalancing {
	t.Helper()
	js := fmt.Sprintf(`{"watcherAddress":%q%s}`, w.URL, extraArgs)
	pl, err := NewWithOptions(context.Background(), rawArgs(js), nil, loadaware.Options{Now: now, NoLoop: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := pl.Engine().Watcher.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	return pl
}

func score(t testing.TB, pl *LoadVariationRiskBalancing, pod *v1.Pod, n *v1.Node) int64 {
	t.Helper()
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	s, st := pl.Score(context.Background(), framework.NewCycleState(), pod, ni)
	if !st.IsSuccess() {
		t.Fatalf("Score(%s): %v", n.Name, st)
	}
	return s
}

func podWith(name string, milliCPU, memBytes int64) *v1.Pod {
	p := lat.Pod(name, milliCPU)
	if memBytes > 0 {
		if p.Spec.Containers[0].Resources.Requests == nil {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{}
		}
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = *resource.NewQuantity(memBytes, resource.BinarySI)
	}
	return p
}

// Upstream TestComputeScore vectors.
func TestComputeScoreVectors(t *testing.T) {
	for _, tc := range []struct {
		margin, sens               float64
		c, req, usedAvg, usedStdev float64
		want                       int64
	}{
		{1, 1, 100, 10, 40, 36, 57},
		{1, 2, 0, 10, 40, 36, 0},
		{1, 2, 100, 10, -40, 36, 65},
		{1, 2, 100, 10, 200, 36, 20},
		{1, 2, 100, 10, 40, -36, 75},
		{1, 2, 100, 10, 40, 120, 25},
		{-1, 1, 100, 10, 40, 36, 75},
		{1, -1, 100, 10, 40, 36, 57},
		{1, 0, 100, 10, 40, 36, 75},
	} {
		got := loadaware.RoundScore((ComputeScore(tc.margin, tc.sens, ResourceStats{tc.c, tc.req, tc.usedAvg, tc.usedStdev})))
		if got != tc.want {
			t.Errorf("%+v: got %d, want %d", tc, got, tc.want)
		}
	}
}

// Upstream GetMuSigma vectors.
func TestMuSigmaVectors(t *testing.T) {
	for _, tc := range []struct {
		s         ResourceStats
		mu, sigma float64
	}{
		{ResourceStats{1000, 100, 400, 360}, 0.5, 0.36},
		{ResourceStats{}, 0, 0},
		{ResourceStats{1000, 100, 1400, 300}, 1, 0.3},
		{ResourceStats{1000, 100, 400, 1600}, 0.5, 1},
		{ResourceStats{1000, 0, 1400, 1600}, 1, 1},
		{ResourceStats{1000, 0, -100, 200}, 0, 0.2},
		{ResourceStats{1000, 400, 0, -200}, 0.4, 0},
	} {
		mu, sigma := tc.s.MuSigma()
		if math.Abs(mu-tc.mu) > 1e-9 || math.Abs(sigma-tc.sigma) > 1e-9 {
			t.Errorf("%+v: got (%v, %v), want (%v, %v)", tc.s, mu, sigma, tc.mu, tc.sigma)
		}
	}
}

// Upstream GetResourceRequested vectors: max(sum of containers, max init) + overhead.
func TestPodRequestVectors(t *testing.T) {
	mk := func(initCPU, initMem int64, cpus, mems []int64, overheadCPU int64) *v1.Pod {
		p := &v1.Pod{}
		p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: *resource.NewMilliQuantity(initCPU, resource.DecimalSI), v1.ResourceMemory: *resource.NewQuantity(initMem, resource.BinarySI)}}}}
		for i := range cpus {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprint(i), Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: *resource.NewMilliQuantity(cpus[i], resource.DecimalSI), v1.ResourceMemory: *resource.NewQuantity(mems[i], resource.BinarySI)}}})
		}
		if overheadCPU > 0 {
			p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(overheadCPU, resource.DecimalSI)}
		}
		return p
	}
	for _, tc := range []struct {
		pod     *v1.Pod
		cpu, mb int64
	}{
		{mk(100, 512, []int64{1000, 500}, []int64{2048, 1024}, 10), 1510, 3072},
		{mk(2000, 4096, []int64{1000, 500}, []int64{2048, 1024}, 10), 2010, 4096},
		{mk(0, 0, []int64{0, 0, 1000}, []int64{0, 200 << 20, 400 << 20}, 0), 1000, 600 << 20},
	} {
		got := estimate(tc.pod)
		if got.MilliCPU != tc.cpu || got.MemoryBytes != tc.mb {
			t.Errorf("got %+v, want cpu %d mem %d", got, tc.cpu, tc.mb)
		}
	}
}

// Upstream TestScore vectors: node 1000m / 1Gi, margin = sensitivity = 1.
func TestScoreVectors(t *testing.T) {
	m := lat.Metric
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		metrics []watcher.Metric
		want    int64
	}{
		{"new node", lat.Pod("p"), []watcher.Metric{m(watcher.CPU, watcher.Average, 50)}, 75},
		{"hot node", lat.Pod("p"), []watcher.Metric{m(watcher.CPU, watcher.Average, 100)}, 50},
		{"avg+std", podWith("p", 200, 256<<20), []watcher.Metric{m(watcher.CPU, watcher.Average, 30), m(watcher.CPU, watcher.Std, 16)}, 67},
		{"cpu and memory", podWith("p", 100, 512<<20), []watcher.Metric{
			m(watcher.CPU, watcher.Average, 40), m(watcher.CPU, watcher.Std, 16), m(watcher.Memory, watcher.Average, 50), m(watcher.Memory, watcher.Std, 10)}, 45},
		{"worst case", podWith("p", 100, 512<<20), []watcher.Metric{
			m(watcher.CPU, watcher.Average, 80), m(watcher.CPU, watcher.Std, 20), m(watcher.Memory, watcher.Average, 25), m(watcher.Memory, watcher.Std, 15)}, 45},
		// AVG wins over a Latest that comes after it; Latest alone is used as the average.
		{"avg beats later latest", lat.Pod("p"), []watcher.Metric{m(watcher.CPU, watcher.Average, 50), m(watcher.CPU, watcher.Latest, 0)}, 75},
		{"latest alone", lat.Pod("p"), []watcher.Metric{m(watcher.CPU, watcher.Latest, 50)}, 75},
		// Upstream 0; Berth neutral.
		{"no metrics", lat.Pod("p"), nil, loadaware.DefaultNeutralScore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := lat.NewWatcher()
			defer w.Close()
			nodes := map[string][]watcher.Metric{"other": {m(watcher.CPU, watcher.Average, 1)}}
			if tc.metrics != nil {
				nodes["node-1"] = tc.metrics
			}
			w.Set(lat.Doc(time.Now(), nodes))
			pl := newPlugin(t, w, "", time.Now)
			if got := score(t, pl, tc.pod, lat.Node("node-1", 1000, 1<<30)); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// Upstream integration scenario with sensitivity 0 (σ ignored): 2-core nodes, CPU AVG 30 /
// 70±20 / 40±30; pod-1 300m → 78/58/73. Then pod-1 reserved on node-1: unlike upstream (83
// there), node-1 now carries pod-1 too: μ = 0.30 + 0.40/2 = 0.5 → 75.
func TestIntegrationScenario(t *testing.T) {
	m := lat.Metric
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{
		"node-1": {m(watcher.CPU, watcher.Average, 30)},
		"node-2": {m(watcher.CPU, watcher.Average, 70), m(watcher.CPU, watcher.Std, 20)},
		"node-3": {m(watcher.CPU, watcher.Average, 40), m(watcher.CPU, watcher.Std, 30)},
	}))
	pl := newPlugin(t, w, `,"safeVarianceMargin":1,"safeVarianceSensitivity":0`, time.Now)
	nodes := []*v1.Node{lat.Node("node-1", 2000, 256), lat.Node("node-2", 2000, 256), lat.Node("node-3", 2000, 256)}
	pod1, pod2 := lat.Pod("pod-1", 300), lat.Pod("pod-2", 100)
	for i, want := range []int64{78, 58, 73} {
		if got := score(t, pl, pod1, nodes[i]); got != want {
			t.Errorf("pod-1 on %s: got %d, want %d", nodes[i].Name, got, want)
		}
	}
	for i, want := range []int64{83, 63, 78} { // upstream's pod-2 numbers, before any Reserve
		if got := score(t, pl, pod2, nodes[i]); got != want {
			t.Errorf("pod-2 before reserve on %s: got %d, want %d", nodes[i].Name, got, want)
		}
	}
	pl.Reserve(context.Background(), nil, pod1, "node-1")
	for i, want := range []int64{75, 63, 78} {
		if got := score(t, pl, pod2, nodes[i]); got != want {
			t.Errorf("pod-2 after reserve on %s: got %d, want %d", nodes[i].Name, got, want)
		}
	}
}

func TestTwoProfilesSideBySide(t *testing.T) {
	m := lat.Metric
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{"n": {m(watcher.CPU, watcher.Average, 40), m(watcher.CPU, watcher.Std, 36)}}))
	node, pod := lat.Node("n", 1000, 1<<30), lat.Pod("p", 100)
	a := newPlugin(t, w, "", time.Now)                                                    // margin 1, sensitivity 1 → 57
	b := newPlugin(t, w, `,"safeVarianceMargin":2,"safeVarianceSensitivity":2`, time.Now) // σ = 2·0.6 → 1 → 25
	c := newPlugin(t, w, `,"safeVarianceMargin":1,"safeVarianceSensitivity":2`, time.Now) // σ = 0.6 → 45
	for _, tc := range []struct {
		pl   *LoadVariationRiskBalancing
		want int64
	}{{a, 57}, {b, 25}, {c, 45}} {
		if got := score(t, tc.pl, pod, node); got != tc.want {
			t.Errorf("margin %v sens %v: got %d, want %d", tc.pl.margin, tc.pl.sensitivity, got, tc.want)
		}
	}
}

func TestBurstSpreads(t *testing.T) {
	m := lat.Metric
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{
		"a": {m(watcher.CPU, watcher.Average, 10), m(watcher.CPU, watcher.Std, 5)},
		"b": {m(watcher.CPU, watcher.Average, 20), m(watcher.CPU, watcher.Std, 5)},
		"c": {m(watcher.CPU, watcher.Average, 30), m(watcher.CPU, watcher.Std, 5)},
	}))
	nodes := []*v1.Node{lat.Node("a", 8000, 32<<30), lat.Node("b", 8000, 32<<30), lat.Node("c", 8000, 32<<30)}
	run := func(pl *LoadVariationRiskBalancing, reserve bool) map[string]int {
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
				pl.Reserve(context.Background(), nil, pod, best)
			}
		}
		return placed
	}
	if placed := run(newPlugin(t, w, "", time.Now), false); len(placed) != 1 {
		t.Fatalf("control run without Reserve spread anyway (%v)", placed)
	}
	placed := run(newPlugin(t, w, "", time.Now), true)
	if len(placed) < 3 {
		t.Fatalf("burst did not spread over all three nodes: %v", placed)
	}
	for n, c := range placed {
		if c > 10 {
			t.Errorf("node %s took %d of 20: %v", n, c, placed)
		}
	}
}

func TestStaleExpiredMissing(t *testing.T) {
	now := time.Now()
	doc := lat.CPUDoc(now, map[string]float64{"fresh": 50, "old": 50, "flagged": 50})
	doc.Nodes = map[string]loadapi.NodeStatus{
		"old":     {Updated: now.Add(-10 * time.Minute).Unix()},
		"flagged": {Updated: now.Unix(), Stale: true},
	}
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(doc)
	pl := newPlugin(t, w, `,"neutralScore":30`, time.Now)
	for n, want := range map[string]int64{"fresh": 75, "old": 30, "flagged": 30, "absent": 30} {
		if got := score(t, pl, lat.Pod("p"), lat.Node(n, 1000, 1<<30)); got != want {
			t.Errorf("%s: got %d, want %d", n, got, want)
		}
	}
	block := newPlugin(t, w, `,"expiredMetricsAction":"Block"`, time.Now)
	for n, want := range map[string]bool{"fresh": true, "old": false, "flagged": false, "absent": false} {
		ni := framework.NewNodeInfo()
		ni.SetNode(lat.Node(n, 1000, 1<<30))
		if got := block.Filter(context.Background(), nil, lat.Pod("p"), ni).IsSuccess(); got != want {
			t.Errorf("Block filter %s: pass=%v, want %v", n, got, want)
		}
	}
}

func TestArgs(t *testing.T) {
	got, err := ParseArgs(rawArgs(`{"watcherAddress":"http://lw:2020"}`))
	if err != nil {
		t.Fatal(err)
	}
	if m, s := varianceKnobs(got); m != 1 || s != 1 || *got.MetricsExpirySeconds != 300 {
		t.Errorf("defaults: %+v", got)
	}
	got, err = ParseArgs(rawArgs(`{"kind":"LoadVariationRiskBalancingArgs","watcherAddress":"http://lw:2020","safeVarianceMargin":2,"safeVarianceSensitivity":0}`))
	if err != nil {
		t.Fatalf("explicit: %v", err)
	}
	if m, s := varianceKnobs(got); m != 2 || s != 0 {
		t.Errorf("explicit: %+v", got)
	}
	for _, tc := range []struct{ args, want string }{
		{`{"watcherAddress":"http://lw","safeVarianceMargin":-1}`, "safeVarianceMargin"},
		{`{"watcherAddress":"http://lw","safeVarianceSensitivity":-0.5}`, "safeVarianceSensitivity"},
		{`{"watcherAddress":"http://lw","safeVarianceMargins":1}`, `unknown field "safeVarianceMargins"`},
		{`{"watcherAddress":"http://lw","targetUtilization":40}`, `unknown field "targetUtilization"`},
		{`{"watcherAddress":"http://lw","kind":"TargetLoadPackingArgs"}`, "kind"},
		{`{"safeVarianceMargin":1}`, "watcherAddress"},
		{`{"watcherAddress":"http://lw","metricsExpirySeconds":0}`, "metricsExpirySeconds"},
	} {
		if _, err := ParseArgs(rawArgs(tc.args)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.args, err, tc.want)
		}
		if _, err := New(context.Background(), rawArgs(tc.args), nil); err == nil {
			t.Errorf("%s: New accepted it", tc.args)
		}
	}
}

// PreScore's cached requests and Score's own computation (score-only configs) must agree.
func TestPreScoreMatchesFallback(t *testing.T) {
	m := lat.Metric
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{"n": {m(watcher.CPU, watcher.Average, 40), m(watcher.Memory, watcher.Average, 30)}}))
	pl := newPlugin(t, w, "", time.Now)
	ni := framework.NewNodeInfo()
	ni.SetNode(lat.Node("n", 1000, 1<<30))
	pod := podWith("p", 400, 300<<20)
	state := framework.NewCycleState()
	if st := pl.PreScore(context.Background(), state, pod, nil); !st.IsSuccess() {
		t.Fatal(st)
	}
	with, _ := pl.Score(context.Background(), state, pod, ni)
	without, _ := pl.Score(context.Background(), framework.NewCycleState(), pod, ni)
	// cpu: μ = 0.4 + 0.4 = 0.8 → 60; memory: 0.3 + 300/1024 → 64.6; min → 60.
	if with != without || with != 60 {
		t.Errorf("with PreScore %d, without %d, want 60", with, without)
	}
}
