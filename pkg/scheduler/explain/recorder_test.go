package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// The framework's instrumentation needs the scheduler metrics registered, as the scheduler does.
func init() { metrics.Register() }

// fakeFilter refuses the nodes listed, with a reason naming the plugin's rule.
type fakeFilter struct{ refuse map[string]string }

func (f *fakeFilter) Name() string { return "FakeFilter" }
func (f *fakeFilter) Filter(_ context.Context, _ fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if r, ok := f.refuse[ni.Node().Name]; ok {
		return fwk.NewStatus(fwk.Unschedulable, r)
	}
	return nil
}

// fakeScore returns a fixed raw score per node and, with norm, halves every score in
// NormalizeScore so raw and normalised differ.
type fakeScore struct {
	name  string
	raw   map[string]int64
	norm  bool
	calls int
}

func (f *fakeScore) Name() string { return f.name }
func (f *fakeScore) Score(_ context.Context, _ fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	f.calls++
	return f.raw[ni.Node().Name], nil
}
func (f *fakeScore) ScoreExtensions() fwk.ScoreExtensions {
	if f.norm {
		return f
	}
	return nil
}
func (f *fakeScore) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, s fwk.NodeScoreList) *fwk.Status {
	for i := range s {
		s[i].Score /= 2
	}
	return nil
}
func (f *fakeScore) ExplainScore(_ *v1.Pod, node string) any {
	if f.name != "Packing" {
		return nil
	}
	return map[string]any{"utilisation": f.raw[node]}
}

// noNominations: the fixture has no preemption, so no node carries nominated pods.
type noNominations struct{}

func (noNominations) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (noNominations) DeleteNominatedPodIfExists(*v1.Pod)                            {}
func (noNominations) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo)          {}
func (noNominations) NominatedPodsForNode(string) []fwk.PodInfo                     { return nil }

type fixture struct {
	fw     framework.Framework
	rec    *Recorder
	nodes  []fwk.NodeInfo
	scores []*fakeScore
}

func newFixture(t *testing.T, refuse map[string]string, nodeNames []string, records, top int) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rec, err := NewRecorder(Options{Records: records, TopNodes: top})
	if err != nil {
		t.Fatal(err)
	}
	packing := &fakeScore{name: "Packing", raw: map[string]int64{}}
	spread := &fakeScore{name: "Spread", raw: map[string]int64{}, norm: true}
	for i, n := range nodeNames {
		packing.raw[n] = int64(5 * (i + 1))
		spread.raw[n] = int64(100 - 5*i)
	}
	reg := fwkruntime.Registry{
		queuesort.Name: queuesort.New,
		defaultbinder.Name: func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return defaultbinder.New(ctx, nil, h)
		},
		"FakeFilter": func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return &fakeFilter{refuse}, nil },
		"Packing":    func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return packing, nil },
		"Spread":     func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return spread, nil },
	}
	for n, f := range reg {
		reg[n] = rec.WrapFactory(n, f)
	}
	profile := config.KubeSchedulerProfile{
		SchedulerName: "berth-scheduler",
		Plugins: &config.Plugins{
			QueueSort: config.PluginSet{Enabled: []config.Plugin{{Name: queuesort.Name}}},
			Filter:    config.PluginSet{Enabled: []config.Plugin{{Name: "FakeFilter"}}},
			Score:     config.PluginSet{Enabled: []config.Plugin{{Name: "Packing", Weight: 3}, {Name: "Spread"}}},
			Bind:      config.PluginSet{Enabled: []config.Plugin{{Name: defaultbinder.Name}}},
		},
	}
	var nodes []*v1.Node
	for _, n := range nodeNames {
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	snap := cache.NewSnapshot(nil, nodes)
	client := fake.NewClientset()
	fw, err := fwkruntime.NewFramework(ctx, reg, &profile,
		fwkruntime.WithSnapshotSharedLister(snap),
		fwkruntime.WithPodNominator(noNominations{}),
		fwkruntime.WithClientSet(client),
		fwkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := snap.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{fw: rec.Wrap(fw, ScoreWeights(profile)), rec: rec, nodes: infos, scores: []*fakeScore{packing, spread}}
}

// cycle drives the wrapped framework the way the scheduler's cycle does: PreFilter, Filter on
// every node, Score on the feasible ones, then the result of SchedulePod.
func (f *fixture) cycle(t *testing.T, pod *v1.Pod) string {
	t.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	if _, st, _ := f.fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
		t.Fatalf("prefilter: %v", st)
	}
	var feasible []fwk.NodeInfo
	for _, n := range f.nodes {
		if st := f.fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, n); st.IsSuccess() {
			feasible = append(feasible, n)
		}
	}
	a := attemptFrom(state)
	if len(feasible) == 0 {
		a.result("", false, fmt.Errorf("0/%d nodes are available", len(f.nodes)))
		return ""
	}
	scores, st := f.fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		t.Fatal(st)
	}
	best := scores[0]
	for _, s := range scores[1:] {
		if s.TotalScore > best.TotalScore {
			best = s
		}
	}
	a.result(best.Name, false, nil)
	return best.Name
}

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

// The record holds what the framework computed: the filter refusal with its reason, every
// Score plugin's raw and normalised score, the weight, the total and the chosen node — and
// every plugin ran exactly once per node (wrapping does not re-run plugins).
func TestRecordOfAFrameworkRun(t *testing.T) {
	f := newFixture(t, map[string]string{"n3": "node n3 is full"}, []string{"n1", "n2", "n3"}, 10, 10)
	chosen := f.cycle(t, pod("p"))
	rec, ok, _ := f.rec.Get("ns", "p")
	if !ok {
		t.Fatal("no record")
	}
	// Packing raw n1=5,n2=10 (weight 3, no normalise); Spread raw n1=100,n2=95 halved (weight 1).
	// n1: 15+50=65, n2: 30+47=77.
	if chosen != "n2" || rec.Chosen != "n2" || rec.Outcome != OutcomeScheduled {
		t.Fatalf("chosen %q, record %q %s", chosen, rec.Chosen, rec.Outcome)
	}
	if rec.Feasible != 2 || rec.Refused != 1 || len(rec.Nodes) != 3 {
		t.Fatalf("counts: %+v", rec)
	}
	tests := []struct {
		node   string
		total  int64
		scores []PluginScore
	}{
		{"n2", 77, []PluginScore{{"Packing", 10, 10, 3, 30}, {"Spread", 95, 47, 1, 47}}},
		{"n1", 65, []PluginScore{{"Packing", 5, 5, 3, 15}, {"Spread", 100, 50, 1, 50}}},
	}
	for i, tc := range tests {
		n := rec.Nodes[i]
		if n.Node != tc.node || n.Total != tc.total || !n.Feasible || n.Chosen != (i == 0) {
			t.Errorf("node %d: %+v, want %s total %d", i, n, tc.node, tc.total)
		}
		if fmt.Sprint(n.Scores) != fmt.Sprint(tc.scores) {
			t.Errorf("%s scores %v, want %v", tc.node, n.Scores, tc.scores)
		}
		if d := n.Details["Packing"]; fmt.Sprint(d) != fmt.Sprintf("map[utilisation:%d]", tc.scores[0].Raw) {
			t.Errorf("%s details %v", tc.node, n.Details)
		}
	}
	refused := rec.Nodes[2]
	if refused.Node != "n3" || refused.Filter == nil || refused.Filter.Plugin != "FakeFilter" || refused.Filter.Reasons[0] != "node n3 is full" {
		t.Errorf("refused node: %+v %+v", refused, refused.Filter)
	}
	for _, s := range f.scores {
		if s.calls != 2 {
			t.Errorf("%s Score ran %d times for 2 feasible nodes", s.name, s.calls)
		}
	}
}

// A pod that fits nowhere: every node's refusal, counted per reason, outcome Unschedulable.
func TestRecordFitsNowhere(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "too small", "b": "too small", "c": "tainted"}, []string{"a", "b", "c"}, 10, 2)
	f.cycle(t, pod("big"))
	rec, _, _ := f.rec.Get("ns", "big")
	if rec.Outcome != OutcomeUnschedulable || rec.Refused != 3 || rec.Feasible != 0 {
		t.Fatalf("%+v", rec)
	}
	// Top 2 by name, the third counted.
	if len(rec.Nodes) != 2 || rec.Nodes[0].Node != "a" || rec.Nodes[1].Node != "b" || rec.OmittedRefused != 1 {
		t.Fatalf("nodes %+v omitted %d", rec.Nodes, rec.OmittedRefused)
	}
	want := []ReasonCount{{"FakeFilter", "too small", 2}, {"FakeFilter", "tainted", 1}}
	if fmt.Sprint(rec.RefusedBy) != fmt.Sprint(want) {
		t.Errorf("refusedBy %v, want %v", rec.RefusedBy, want)
	}
}

// Bounds: 100 000 pods through a 50-record LRU with 3 kept nodes hold 50 records of at most 3
// nodes; an evicted pod is reported as evicted, a retried pod counts attempts.
func TestBoundsUnder100000Pods(t *testing.T) {
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("node-%02d", i)
	}
	f := newFixture(t, map[string]string{"node-00": "x", "node-01": "y", "node-02": "z", "node-03": "w"}, names, 50, 3)
	for i := 0; i < 100_000; i++ {
		f.cycle(t, pod(fmt.Sprintf("p%d", i)))
	}
	if n := f.rec.Len(); n != 50 {
		t.Fatalf("%d records held, want 50", n)
	}
	f.rec.store.mu.Lock()
	for e := f.rec.store.ll.Front(); e != nil; e = e.Next() {
		a := e.Value.(*attempt)
		if len(a.scored) > 3 || len(a.refused) > 3 {
			t.Fatalf("attempt holds %d scored, %d refused nodes", len(a.scored), len(a.refused))
		}
	}
	if len(f.rec.store.evicted) > 50 {
		t.Fatalf("%d evicted names remembered", len(f.rec.store.evicted))
	}
	f.rec.store.mu.Unlock()
	last, ok, _ := f.rec.Get("ns", "p99999")
	if !ok || last.Feasible != 16 || last.OmittedFeasible != 13 || last.OmittedRefused != 1 || len(last.Nodes) != 6 {
		t.Fatalf("last record %+v", last)
	}
	if _, ok, ev := f.rec.Get("ns", "p99949"); ok || ev.IsZero() {
		t.Fatalf("p99949 should be evicted (ok=%v ev=%v)", ok, ev)
	}
	f.cycle(t, pod("p99999"))
	if again, _, _ := f.rec.Get("ns", "p99999"); again.Attempts != 2 {
		t.Fatalf("attempts %d, want 2", again.Attempts)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		o    Options
		want string
	}{
		{Options{Records: 0, TopNodes: 10}, ""},
		{Options{Records: 1000, TopNodes: 10}, ""},
		{Options{Records: -1, TopNodes: 10}, "explain-records"},
		{Options{Records: 10, TopNodes: 0}, "explain-top-nodes"},
		{Options{Records: MaxRecords + 1, TopNodes: 10}, "explain-records"},
	}
	for _, tc := range tests {
		err := tc.o.Validate().ToAggregate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	if r, err := NewRecorder(Options{Records: 0, TopNodes: 10}); r != nil || err != nil {
		t.Errorf("off: %v %v", r, err)
	}
}

// The endpoint's answers: a record, and a clear 404 for each kind of missing record.
func TestHandler(t *testing.T) {
	f := newFixture(t, nil, []string{"n1", "n2"}, 1, 10)
	f.cycle(t, pod("old"))
	f.cycle(t, pod("p")) // evicts old
	pods := map[string]*v1.Pod{
		"p":       pod("p"),
		"other":   {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "u2"}, Spec: v1.PodSpec{SchedulerName: "default-scheduler"}},
		"pending": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pending", UID: "u3"}, Spec: v1.PodSpec{SchedulerName: "berth-scheduler"}},
		"bound":   {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bound", UID: "u4"}, Spec: v1.PodSpec{SchedulerName: "berth-scheduler", NodeName: "n1"}},
	}
	pods["p"].Spec.SchedulerName = "berth-scheduler"
	get := func(ns, name string) (*v1.Pod, error) {
		if p, ok := pods[name]; ok {
			return p, nil
		}
		return nil, fmt.Errorf("not found")
	}
	h := Handler(f.rec, get, []string{"berth-scheduler"})
	tests := []struct {
		query, reason string
		code          int
	}{
		{"namespace=ns&name=p", "", 200},
		{"namespace=ns&name=old", ReasonEvicted, 404},
		{"namespace=ns&name=other", ReasonOtherScheduler, 404},
		{"namespace=ns&name=pending", ReasonNeverSeen, 404},
		{"namespace=ns&name=bound", ReasonBeforeStart, 404},
		{"namespace=ns&name=ghost", ReasonNeverSeen, 404},
		{"namespace=ns", ReasonBadRequest, 400},
	}
	for _, tc := range tests {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, Path+"?"+tc.query, nil))
		if w.Code != tc.code {
			t.Errorf("%s: %d %s", tc.query, w.Code, w.Body)
			continue
		}
		if tc.code == 200 {
			var r Record
			if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || r.Name != "p" || r.Chosen == "" {
				t.Errorf("%s: %v %+v", tc.query, err, r)
			}
			continue
		}
		var nf NotFound
		if err := json.Unmarshal(w.Body.Bytes(), &nf); err != nil || nf.Reason != tc.reason || nf.Error == "" {
			t.Errorf("%s: %v %+v", tc.query, err, nf)
		}
	}
	// A new pod reusing the name of a recorded one is not answered with the old record.
	pods["p"] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "new"}, Spec: v1.PodSpec{SchedulerName: "berth-scheduler"}}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, Path+"?namespace=ns&name=p", nil))
	if w.Code != 404 || !strings.Contains(w.Body.String(), ReasonStale) {
		t.Errorf("stale: %d %s", w.Code, w.Body)
	}
	// Recording off.
	w = httptest.NewRecorder()
	Handler(nil, get, nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, Path+"?name=p", nil))
	if w.Code != 404 || !strings.Contains(w.Body.String(), ReasonDisabled) {
		t.Errorf("off: %d %s", w.Code, w.Body)
	}
}
