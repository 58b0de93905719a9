package lowriskovercommitment

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
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

func newPlugin(t testing.TB, w *lat.Watcher, extraArgs string) *LowRiskOverCommitment {
	t.Helper()
	js := fmt.Sprintf(`{"watcherAddress":%q%s}`, w.URL, extraArgs)
	pl, err := NewWithOptions(context.Background(), &runtime.Unknown{Raw: []byte(js), ContentType: runtime.ContentTypeJSON}, nil, loadaware.Options{NoLoop: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := pl.Engine().Watcher.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	return pl
}

// pod has one container requesting and limiting cpu (millicores) and memory (bytes); 0 = unset.
func pod(name string, reqCPU, limCPU, reqMem, limMem int64) *v1.Pod {
	p := lat.Pod(name, 0)
	set := func(rl *v1.ResourceList, r v1.ResourceName, q *resource.Quantity) {
		if q.IsZero() {
			return
		}
		if *rl == nil {
			*rl = v1.ResourceList{}
		}
		(*rl)[r] = *q
	}
	c := &p.Spec.Containers[0].Resources
	set(&c.Requests, v1.ResourceCPU, resource.NewMilliQuantity(reqCPU, resource.DecimalSI))
	set(&c.Limits, v1.ResourceCPU, resource.NewMilliQuantity(limCPU, resource.DecimalSI))
	set(&c.Requests, v1.ResourceMemory, resource.NewQuantity(reqMem, resource.BinarySI))
	set(&c.Limits, v1.ResourceMemory, resource.NewQuantity(limMem, resource.BinarySI))
	return p
}

func nodeInfo(n *v1.Node, pods ...*v1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

// Upstream TestLowRiskOverCommitment_computeRisk: node allocatable 4000m / 4096 B, CPU mean 80 %
// without deviation, memory 25 %, window 5, weights 0.5.
func TestRiskVectors(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		r, l, rOther, lOther float64
		c, mean              float64
		want                 float64
	}{
		{"cpu-1", 2000, 3000, 1000, 2000, 4000, 0.8, 0.5},
		{"mem-1", 2048, 6144, 0, 0, 4096, 0.25, 0.25},
		{"cpu-2", 4000, 5000, 3000, 4000, 4000, 0.8, 1.0},
		{"mem-2", 1024, 7168, 512, 6144, 4096, 0.25, 0.75},
	} {
		in := Inputs{Request: tc.r, Limit: tc.l, RequestOthers: tc.rOther, LimitOthers: tc.lOther, Capacity: tc.c,
			Measured: true, Mean: tc.mean, Weight: 0.5, SqrtWindow: math.Sqrt(5)}
		if got := in.Risk().Risk; math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: risk %v, want %v (%+v)", tc.name, got, tc.want, in.Risk())
		}
	}
}

// Upstream beta_test.go: moment matching and the CDF of known Beta distributions (closed
// forms, and for the last three Simpson's rule over the density to 1e-9).
func TestBetaVectors(t *testing.T) {
	for _, tc := range []struct {
		a, b, x, want float64
	}{
		{2, 2, 0.5, 0.5}, {2, 2, 0, 0}, {2, 2, 1, 1},
		{1, 1, 0.3, 0.3},            // uniform
		{1, 2, 0.25, 1 - 0.75*0.75}, // 1 − (1−x)²
		{3, 1, 0.5, 0.125},          // x³
		{0.5, 0.5, 0.5, 0.5},        // arcsine, symmetric
		{5, 3, 0.9, 0.9743085},      // far side of the fraction's switch
		{30, 70, 0.3, 0.5116251},    // large shapes, near the mean
		{0.2, 4, 1e-6, 0.0888387},   // a small shape near 0
	} {
		got := (&betaDist{tc.a, tc.b}).cdf(tc.x)
		if math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("I_%v(%v, %v) = %v, want %v", tc.x, tc.a, tc.b, got, tc.want)
		}
	}
	if b := fitBeta(0.5, 1.0/12); b == nil || math.Abs(b.alpha-1) > 1e-9 || math.Abs(b.beta-1) > 1e-9 {
		t.Errorf("fitBeta(0.5, 1/12) = %+v, want Beta(1, 1)", b)
	}
	for _, bad := range [][2]float64{{0, 0}, {0.5, 0.25}, {1, 0.1}, {0.5, 0}} {
		if b := fitBeta(bad[0], bad[1]); b != nil {
			t.Errorf("fitBeta(%v) = %+v, want none", bad, b)
		}
	}
	for _, tc := range [][2]float64{{0, 0}, {1, 0}, {0.5, math.Sqrt(0.99 * 0.25)}, {-1, 0}} {
		if got := maxDeviation(tc[0]); math.Abs(got-tc[1]) > 1e-12 {
			t.Errorf("maxDeviation(%v) = %v, want %v", tc[0], got, tc[1])
		}
	}
}

// Upstream's integration scenario: two 2-core nodes, weights 1 (limits only): node-1's limits
// stay under allocatable (100), node-2's pass it by 200m of the 1600m limits leave over
// requests (risk 0.125, score 88), so pod-3 goes to node-1.
func TestIntegrationScenario(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{
		"node-1": {lat.Metric(watcher.CPU, watcher.Average, 60), lat.Metric(watcher.CPU, watcher.Std, 30)},
		"node-2": {lat.Metric(watcher.CPU, watcher.Average, 30), lat.Metric(watcher.CPU, watcher.Std, 20)},
	}))
	pl := newPlugin(t, w, `,"riskLimitWeights":{"cpu":1,"memory":1}`)
	n1 := nodeInfo(lat.Node("node-1", 2000, 256), pod("pod-1", 500, 500, 0, 0))
	n2 := nodeInfo(lat.Node("node-2", 2000, 256), pod("pod-2", 100, 1200, 0, 0))
	incoming := pod("pod-3", 500, 1000, 64, 64)
	for _, tc := range []struct {
		ni   fwk.NodeInfo
		want int64
	}{{n1, 100}, {n2, 88}} {
		s, st := pl.Score(context.Background(), framework.NewCycleState(), incoming, tc.ni)
		if !st.IsSuccess() || s != tc.want {
			t.Errorf("%s: score %d (%v), want %d", tc.ni.Node().Name, s, st, tc.want)
		}
	}
}

// Upstream's "new node" case: a BestEffort pod scores 0 everywhere; a node without fresh
// metrics gets the engine's neutral score (upstream: 0), as the other load-aware plugins.
func TestBestEffortAndUnknownLoad(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{"known": {lat.Metric(watcher.CPU, watcher.Average, 20)}}))
	pl := newPlugin(t, w, `,"neutralScore":42`)
	for _, tc := range []struct {
		node string
		pod  *v1.Pod
		want int64
	}{
		{"known", pod("be", 0, 0, 0, 0), 0},
		{"unknown", pod("be", 0, 0, 0, 0), 0},
		{"unknown", pod("burstable", 100, 200, 0, 0), 42},
	} {
		s, _ := pl.Score(context.Background(), nil, tc.pod, nodeInfo(lat.Node(tc.node, 4000, 4096)))
		if s != tc.want {
			t.Errorf("%s on %s: %d, want %d", tc.pod.Name, tc.node, s, tc.want)
		}
	}
}

// TestNodeTotalsFollowThePods: the cached sums move with the NodeInfo's pods (a pod added to
// the node changes its limit risk), and a pod's limits are raised to its requests.
func TestNodeTotalsFollowThePods(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{"n": {lat.Metric(watcher.CPU, watcher.Average, 10)}}))
	pl := newPlugin(t, w, `,"riskLimitWeights":{"cpu":"1","memory":"1"}`)
	ni := framework.NewNodeInfo(pod("a", 1000, 1000, 0, 0))
	ni.SetNode(lat.Node("n", 2000, 4096))
	incoming := pod("in", 500, 500, 0, 0)
	before, _ := pl.Score(context.Background(), nil, incoming, ni)
	// Requests 1000m, no limit: counted at its request.
	ni.AddPod(pod("b", 1000, 0, 0, 0))
	after, _ := pl.Score(context.Background(), nil, incoming, ni)
	// Limits 2500 > 2000 allocatable, requests capped at 2000: risk 500/500 = 1.
	if before != 100 || after != 0 {
		t.Errorf("scores %d then %d, want 100 then 0", before, after)
	}
}

// TestExplain: the decision record's terms redo the score: 100·(1 − the larger risk).
func TestExplain(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{"n": {
		lat.Metric(watcher.CPU, watcher.Average, 50), lat.Metric(watcher.CPU, watcher.Std, 10),
		lat.Metric(watcher.Memory, watcher.Average, 30), lat.Metric(watcher.Memory, watcher.Std, 5)}}))
	pl := newPlugin(t, w, "")
	ni := nodeInfo(lat.Node("n", 4000, 8<<30), pod("a", 1000, 3000, 1<<30, 4<<30))
	incoming := pod("in", 500, 2000, 1<<30, 2<<30)
	s, _ := pl.Score(context.Background(), nil, incoming, ni)
	d := pl.ExplainScore(context.Background(), nil, incoming, ni).(decisionapi.LoadDetail)
	worst := 0.0
	for _, term := range d.Terms {
		if term.Name == "risk" {
			worst = math.Max(worst, term.Value)
		}
	}
	if len(d.Terms) != 8 || loadaware.RoundScore(100*(1-worst)) != s || d.Formula == "" {
		t.Fatalf("score %d, detail %+v", s, d)
	}
	rec := decisionapi.NodeRecord{Node: "n", Details: map[string]any{Name: d}}
	if lines := rec.InputLines(); len(lines) != 1 || !strings.Contains(lines[0], "cpu limitRisk") {
		t.Errorf("input lines %q", lines)
	}
}

// TestArgs: defaults as upstream; bad values are refused naming the field (upstream replaces
// them with the defaults silently).
func TestArgs(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), nil))
	pl := newPlugin(t, w, "")
	if pl.sqrtWindow != math.Sqrt(5) || pl.weights != [2]float64{0.5, 0.5} {
		t.Errorf("defaults: √window %v, weights %v", pl.sqrtWindow, pl.weights)
	}
	for _, tc := range []struct{ args, want string }{
		{`,"smoothingWindowSize":0`, "smoothingWindowSize: Invalid value: 0"},
		{`,"riskLimitWeights":{"cpu":1.5}`, `riskLimitWeights.cpu: Invalid value: "1.5"`},
		{`,"riskLimitWeights":{"memory":-1}`, `riskLimitWeights.memory: Invalid value: "-1"`},
		{`,"riskLimitWeights":{"gpu":0.5}`, `riskLimitWeights.gpu`},
		{`,"smoothingWindow":5`, `smoothingWindow: Unsupported value`},
	} {
		js := fmt.Sprintf(`{"watcherAddress":%q%s}`, w.URL, tc.args)
		_, err := NewWithOptions(context.Background(), &runtime.Unknown{Raw: []byte(js)}, nil, loadaware.Options{NoLoop: true})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestPreScoreMatchesFallback: Score reads the pod's requests and limits from PreScore's state
// and computes the same without it.
func TestPreScoreMatchesFallback(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), map[string][]watcher.Metric{"n": {lat.Metric(watcher.CPU, watcher.Average, 70), lat.Metric(watcher.CPU, watcher.Std, 15)}}))
	pl := newPlugin(t, w, "")
	ni := nodeInfo(lat.Node("n", 4000, 4096), pod("a", 2000, 3500, 0, 0))
	incoming := pod("in", 500, 1000, 0, 0)
	state := framework.NewCycleState()
	if st := pl.PreScore(context.Background(), state, incoming, []fwk.NodeInfo{ni}); !st.IsSuccess() {
		t.Fatal(st)
	}
	a, _ := pl.Score(context.Background(), state, incoming, ni)
	b, _ := pl.Score(context.Background(), nil, incoming, ni)
	if a != b || a <= 0 || a >= 100 {
		t.Errorf("prepared %d, fallback %d", a, b)
	}
}
