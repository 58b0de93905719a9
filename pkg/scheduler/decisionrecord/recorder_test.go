package decisionrecord

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/berth-sched/berth/pkg/decisionapi"
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
	mu    sync.Mutex
	name  string
	raw   map[string]int64
	norm  bool
	calls int
	// explained counts ExplainScore calls (only for the nodes a record keeps).
	explained int
}

func (f *fakeScore) Name() string { return f.name }
func (f *fakeScore) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	return f.raw[ni.Node().Name], nil
}

// ExplainScore implements Explainer: Packing's detail is its raw score, Spread's a load detail
// (kept by value).
func (f *fakeScore) ExplainScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) any {
	f.mu.Lock()
	f.explained++
	f.mu.Unlock()
	if f.name == "Packing" {
		return f.raw[ni.Node().Name]
	}
	return decisionapi.LoadDetail{MeasuredPercent: float64(f.raw[ni.Node().Name])}
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

// noNominations: the fixture has no preemption, so no node carries nominated pods.
type noNominations struct{}

func (noNominations) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (noNominations) DeleteNominatedPodIfExists(*v1.Pod)                            {}
func (noNominations) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo)          {}
func (noNominations) NominatedPodsForNode(string) []fwk.PodInfo                     { return nil }

type fixture struct {
	fw     framework.Framework
	rec    *Recorder
	events *events.FakeRecorder
	nodes  []fwk.NodeInfo
	scores []*fakeScore
}

func newFixture(t *testing.T, refuse map[string]string, nodeNames []string, records, top int) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rec := NewRecorder()
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
		"Packing":    rec.ExplainerFactory(func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return packing, nil }),
		"Spread":     rec.ExplainerFactory(func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return spread, nil }),
		// The plugin's factory is what turns recording on for the profile.
		Name: NewFactory(rec),
	}
	profile := config.KubeSchedulerProfile{
		SchedulerName: "berth-scheduler",
		Plugins: &config.Plugins{
			QueueSort: config.PluginSet{Enabled: []config.Plugin{{Name: queuesort.Name}}},
			Filter:    config.PluginSet{Enabled: []config.Plugin{{Name: "FakeFilter"}}},
			Score:     config.PluginSet{Enabled: []config.Plugin{{Name: "Packing", Weight: 3}, {Name: "Spread"}}},
			Bind:      config.PluginSet{Enabled: []config.Plugin{{Name: defaultbinder.Name}}},
			// DecisionRecord implements no extension point: multiPoint only instantiates it.
			MultiPoint: config.PluginSet{Enabled: []config.Plugin{{Name: Name}}},
		},
		PluginConfig: []config.PluginConfig{{Name: Name, Args: &runtime.Unknown{
			ContentType: runtime.ContentTypeJSON,
			Raw:         []byte(fmt.Sprintf(`{"records":%d,"topNodes":%d,"summary":"Event"}`, records, top)),
		}}},
	}
	var nodes []*v1.Node
	for _, n := range nodeNames {
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	snap := cache.NewSnapshot(nil, nodes)
	client := fake.NewClientset()
	ev := events.NewFakeRecorder(10)
	fw, err := fwkruntime.NewFramework(ctx, reg, &profile,
		fwkruntime.WithEventRecorder(ev),
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
	pr := rec.profile("berth-scheduler")
	if pr == nil {
		t.Fatal("the DecisionRecord factory did not enable the profile")
	}
	rec.configure(pr, profile)
	return &fixture{fw: rec.Wrap(fw, pr), rec: rec, events: ev, nodes: infos, scores: []*fakeScore{packing, spread}}
}

func (f *fixture) get(ns, name string) (decisionapi.Record, bool, time.Time) {
	return f.rec.profile("berth-scheduler").store.get(ns, name)
}

func (f *fixture) store() *store { return f.rec.profile("berth-scheduler").store }

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
	if len(feasible) == 0 {
		f.rec.scheduled(ctx, f.fw, state, pod, scheduler.ScheduleResult{}, fmt.Errorf("0/%d nodes are available", len(f.nodes)))
		return ""
	}
	if len(feasible) == 1 {
		// The scheduler does not score a lone feasible node.
		name := feasible[0].Node().Name
		f.rec.scheduled(ctx, f.fw, state, pod, scheduler.ScheduleResult{SuggestedHost: name, FeasibleNodes: 1}, nil)
		return name
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
	f.rec.scheduled(ctx, f.fw, state, pod, scheduler.ScheduleResult{SuggestedHost: best.Name, FeasibleNodes: len(feasible)}, nil)
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
	rec, ok, _ := f.get("ns", "p")
	if !ok {
		t.Fatal("no record")
	}
	// Packing raw n1=5,n2=10 (weight 3, no normalise); Spread raw n1=100,n2=95 halved (weight 1).
	// n1: 15+50=65, n2: 30+47=77.
	if chosen != "n2" || rec.Chosen != "n2" || rec.Outcome != decisionapi.OutcomeScheduled {
		t.Fatalf("chosen %q, record %q %s", chosen, rec.Chosen, rec.Outcome)
	}
	if rec.Feasible != 2 || rec.Refused != 1 || len(rec.Nodes) != 3 {
		t.Fatalf("counts: %+v", rec)
	}
	tests := []struct {
		node   string
		total  int64
		scores []decisionapi.PluginScore
	}{
		{"n2", 77, []decisionapi.PluginScore{{Plugin: "Packing", Raw: 10, Normalized: 10, Weight: 3, Weighted: 30}, {Plugin: "Spread", Raw: 95, Normalized: 47, Weight: 1, Weighted: 47}}},
		{"n1", 65, []decisionapi.PluginScore{{Plugin: "Packing", Raw: 5, Normalized: 5, Weight: 3, Weighted: 15}, {Plugin: "Spread", Raw: 100, Normalized: 50, Weight: 1, Weighted: 50}}},
	}
	for i, tc := range tests {
		n := rec.Nodes[i]
		if n.Node != tc.node || n.Total != tc.total || !n.Feasible || n.Chosen != (i == 0) {
			t.Errorf("node %d: %+v, want %s total %d", i, n, tc.node, tc.total)
		}
		if fmt.Sprint(n.Scores) != fmt.Sprint(tc.scores) {
			t.Errorf("%s scores %v, want %v", tc.node, n.Scores, tc.scores)
		}
		if d := n.Details["Packing"]; d != tc.scores[0].Raw {
			t.Errorf("%s details %v", tc.node, n.Details)
		}
		if d := n.Details["Spread"]; !reflect.DeepEqual(d, decisionapi.LoadDetail{MeasuredPercent: float64(tc.scores[1].Raw)}) {
			t.Errorf("%s load detail %#v", tc.node, d)
		}
	}
	refused := rec.Nodes[2]
	if refused.Node != "n3" || refused.Filter == nil || refused.Filter.Plugin != "FakeFilter" || refused.Filter.Reasons[0] != "node n3 is full" {
		t.Errorf("refused node: %+v %+v", refused, refused.Filter)
	}
	for _, s := range f.scores {
		// Score once per feasible node; the explanation once per kept node, after scoring.
		if s.calls != 2 || s.explained != 2 {
			t.Errorf("%s Score ran %d times, ExplainScore %d times, for 2 feasible nodes kept", s.name, s.calls, s.explained)
		}
	}
}

// A pod that fits nowhere: every node's refusal, counted per reason, outcome Unschedulable.
func TestRecordFitsNowhere(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "too small", "b": "too small", "c": "tainted"}, []string{"a", "b", "c"}, 10, 2)
	f.cycle(t, pod("big"))
	rec, _, _ := f.get("ns", "big")
	if rec.Outcome != decisionapi.OutcomeUnschedulable || rec.Refused != 3 || rec.Feasible != 0 {
		t.Fatalf("%+v", rec)
	}
	// Top 2 by name, the third counted.
	if len(rec.Nodes) != 2 || rec.Nodes[0].Node != "a" || rec.Nodes[1].Node != "b" || rec.OmittedRefused != 1 {
		t.Fatalf("nodes %+v omitted %d", rec.Nodes, rec.OmittedRefused)
	}
	want := []decisionapi.ReasonCount{{Plugin: "FakeFilter", Reason: "too small", Nodes: 2}, {Plugin: "FakeFilter", Reason: "tainted", Nodes: 1}}
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
	st := f.store()
	st.mu.Lock()
	for e := st.ll.Front(); e != nil; e = e.Next() {
		a := e.Value.(*attempt)
		if len(a.scored) > 3 || a.refused.count() > 3 {
			t.Fatalf("attempt holds %d scored, %d refused nodes", len(a.scored), a.refused.count())
		}
	}
	if len(st.evicted) > 50 {
		t.Fatalf("%d evicted names remembered", len(st.evicted))
	}
	st.mu.Unlock()
	last, ok, _ := f.get("ns", "p99999")
	if !ok || last.Feasible != 16 || last.OmittedFeasible != 13 || last.OmittedRefused != 1 || len(last.Nodes) != 6 {
		t.Fatalf("last record %+v", last)
	}
	if _, ok, ev := f.get("ns", "p99949"); ok || ev.IsZero() {
		t.Fatalf("p99949 should be evicted (ok=%v ev=%v)", ok, ev)
	}
	f.cycle(t, pod("p99999"))
	if again, _, _ := f.get("ns", "p99999"); again.Attempts != 2 {
		t.Fatalf("attempts %d, want 2", again.Attempts)
	}
}

// The Scheduled event carries the summary (summary: Event), other events are untouched.
func TestScheduledEventSummary(t *testing.T) {
	f := newFixture(t, map[string]string{"n3": "full"}, []string{"n1", "n2", "n3"}, 10, 10)
	p := pod("p")
	node := f.cycle(t, p)
	f.fw.EventRecorder().WithLogger(klog.Background()).Eventf(p, nil, v1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %v/%v to %v", p.Namespace, p.Name, node)
	f.fw.EventRecorder().Eventf(p, nil, v1.EventTypeNormal, "Other", "Binding", "untouched %d %%", 5)
	want := []string{
		"Normal Scheduled Successfully assigned ns/p to n2; Spread 47, Packing 10×3, total 77; next best n1 65",
		"Normal Other untouched 5 %",
	}
	for _, w := range want {
		select {
		case got := <-f.events.Events:
			if got != w {
				t.Errorf("event %q\nwant  %q", got, w)
			}
		default:
			t.Fatalf("missing event %q", w)
		}
	}
}

// With no profile enabling DecisionRecord nothing is wrapped.
func TestInstallWithoutRecordingProfileChangesNothing(t *testing.T) {
	rec := NewRecorder()
	sched := &scheduler.Scheduler{Profiles: map[string]framework.Framework{}}
	if err := rec.Install(sched, nil); err != nil || sched.SchedulePod != nil || rec.Enabled() {
		t.Fatalf("err %v, SchedulePod wrapped %v, enabled %v", err, sched.SchedulePod != nil, rec.Enabled())
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
		{"namespace=ns&name=old", decisionapi.ReasonEvicted, 404},
		{"namespace=ns&name=other", decisionapi.ReasonOtherScheduler, 404},
		{"namespace=ns&name=pending", decisionapi.ReasonNeverSeen, 404},
		{"namespace=ns&name=bound", decisionapi.ReasonBeforeStart, 404},
		{"namespace=ns&name=ghost", decisionapi.ReasonNeverSeen, 404},
		{"namespace=ns&name=p&uid=older", decisionapi.ReasonStale, 404},
		{"namespace=ns", decisionapi.ReasonBadRequest, 400},
	}
	for _, tc := range tests {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, decisionapi.Path+"?"+tc.query, nil))
		if w.Code != tc.code {
			t.Errorf("%s: %d %s", tc.query, w.Code, w.Body)
			continue
		}
		if tc.code == 200 {
			var r decisionapi.Record
			if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || r.Name != "p" || r.Chosen == "" {
				t.Errorf("%s: %v %+v", tc.query, err, r)
			}
			continue
		}
		var nf decisionapi.NotFound
		if err := json.Unmarshal(w.Body.Bytes(), &nf); err != nil || nf.Reason != tc.reason || nf.Error == "" {
			t.Errorf("%s: %v %+v", tc.query, err, nf)
		}
	}
	// A new pod reusing the name of a recorded one is not answered with the old record.
	pods["p"] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "new"}, Spec: v1.PodSpec{SchedulerName: "berth-scheduler"}}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, decisionapi.Path+"?namespace=ns&name=p", nil))
	if w.Code != 404 || !strings.Contains(w.Body.String(), decisionapi.ReasonStale) {
		t.Errorf("stale: %d %s", w.Code, w.Body)
	}
	// Recording off: in the whole scheduler, and in the pod's profile only.
	for _, h := range []http.Handler{Handler(nil, get, nil), Handler(NewRecorder(), get, nil)} {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, decisionapi.Path+"?namespace=ns&name=p", nil))
		if w.Code != 404 || !strings.Contains(w.Body.String(), decisionapi.ReasonDisabled) {
			t.Errorf("off: %d %s", w.Code, w.Body)
		}
	}
	pods["q"] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q", UID: "uq"}, Spec: v1.PodSpec{SchedulerName: "quiet"}}
	w = httptest.NewRecorder()
	Handler(f.rec, get, []string{"berth-scheduler", "quiet"}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, decisionapi.Path+"?namespace=ns&name=q", nil))
	if w.Code != 404 || !strings.Contains(w.Body.String(), decisionapi.ReasonDisabled) || !strings.Contains(w.Body.String(), "profile quiet") {
		t.Errorf("profile without recording: %d %s", w.Code, w.Body)
	}
}

// Only the nodes a record keeps are explained, and only for plugins that scored them.
func TestExplainKeptNodesOnly(t *testing.T) {
	names := []string{"k1", "k2", "k3", "k4", "k5"}
	f := newFixture(t, nil, names, 10, 2)
	f.cycle(t, pod("p"))
	rec, _, _ := f.get("ns", "p")
	if len(rec.Nodes) != 2 {
		t.Fatalf("kept %d nodes, want topNodes 2: %+v", len(rec.Nodes), rec.Nodes)
	}
	for _, s := range f.scores {
		if s.calls != len(names) || s.explained != 2 {
			t.Errorf("%s: Score %d times, ExplainScore %d times; want %d and 2", s.name, s.calls, s.explained, len(names))
		}
	}
	for _, n := range rec.Nodes {
		if len(n.Details) != 2 {
			t.Errorf("%s details %v, want both plugins'", n.Node, n.Details)
		}
	}
}

// A chosen node no score covers (one feasible node, or a batching hint) still gets what each
// explainer reads for it, so the placement's prediction is on record; a scored chosen node is
// not explained twice.
func TestUnscoredChosenNodeIsExplained(t *testing.T) {
	f := newFixture(t, map[string]string{"n2": "full", "n3": "full"}, []string{"n1", "n2", "n3"}, 10, 10)
	if got := f.cycle(t, pod("lone")); got != "n1" {
		t.Fatalf("chosen %q, want the one feasible node n1", got)
	}
	rec, _, _ := f.get("ns", "lone")
	if !rec.ScoringSkipped || len(rec.Nodes) == 0 || rec.Nodes[0].Node != "n1" || len(rec.Nodes[0].Scores) != 0 {
		t.Fatalf("want n1 chosen unscored first: %+v", rec)
	}
	d, ok := rec.Nodes[0].Load("Spread")
	if !ok || d.MeasuredPercent != 100 || rec.Nodes[0].Details["Packing"] != int64(5) {
		t.Errorf("chosen n1's details %v, want both plugins' reading of n1", rec.Nodes[0].Details)
	}
	for _, s := range f.scores {
		if s.calls != 0 || s.explained != 1 {
			t.Errorf("%s: Score %d times, ExplainScore %d times; want 0 and 1", s.name, s.calls, s.explained)
		}
	}
	// A scored cycle: ExplainScore once per kept node, none more for the chosen one.
	g := newFixture(t, nil, []string{"n1", "n2"}, 10, 10)
	g.cycle(t, pod("p"))
	for _, s := range g.scores {
		if s.explained != 2 {
			t.Errorf("%s: ExplainScore %d times for 2 kept nodes", s.name, s.explained)
		}
	}
}
