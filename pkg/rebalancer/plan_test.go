package rebalancer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// loads builds a fresh document: node → cpu%, memory%.
func loads(now time.Time, u map[string][2]float64) *Load {
	l := &Load{Fetched: now, Nodes: map[string]*NodeLoad{}}
	for n, v := range u {
		l.Nodes[n] = &NodeLoad{Usage: Usage{v[0], v[1]}, HasCPU: true, HasMemory: true, HasMetrics: true, Updated: now.Add(-5 * time.Second)}
		l.Newest = now.Add(-5 * time.Second)
	}
	return l
}

// evictions is a fake Eviction API: outcomes by pod name (default evicted).
type evictions struct {
	answer map[string]Outcome
	calls  []string
}

func (e *evictions) evict(_ context.Context, m Move) (Outcome, error) {
	e.calls = append(e.calls, m.Pod.Name+">"+m.To)
	if o, ok := e.answer[m.Pod.Name]; ok {
		return o, nil
	}
	return Evicted, nil
}

func skipped(r *Result) string {
	var s []string
	for _, x := range r.Skipped {
		s = append(s, x.Name+":"+x.Reason)
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func TestPlan(t *testing.T) {
	ctx := context.Background()
	fit, err := NewFitter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Three 10-CPU nodes: hot at 90 % CPU, two cold.
	pool := func(mut ...func(*corev1.Node)) []*corev1.Node {
		return []*corev1.Node{node("hot", "10", "100Gi"), node("cold1", "10", "100Gi", mut...), node("cold2", "10", "100Gi", mut...)}
	}
	standard := map[string][2]float64{"hot": {95, 20}, "cold1": {10, 10}, "cold2": {20, 10}}
	// Pods on the hot node: 1 CPU each (10 % of the node) unless said otherwise.
	onHot := func(names ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, n := range names {
			out = append(out, pod("app", n, "hot", "1", "1Gi"))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		mut    func(*berthv1alpha1.RebalancerSpec)
		nodes  []*corev1.Node
		pods   []*corev1.Pod
		load   map[string][2]float64
		moves  []berthv1alpha1.RebalancerMove
		answer map[string]Outcome
		// rounds run before the checked one (anomaly counting).
		rounds int
		stale  bool

		wantReason string
		wantCalls  string
		wantSkips  string
		wantHot    int
	}{
		{name: "relieved until under the threshold", nodes: pool(), pods: onHot("a", "b", "c"), load: map[string][2]float64{"hot": {85, 20}, "cold1": {10, 10}, "cold2": {20, 10}},
			wantReason: ReasonActing, wantHot: 1, wantCalls: "a>cold1"},
		{name: "at most perNode per round", nodes: pool(), pods: []*corev1.Pod{pod("app", "a", "hot", "500m", "1Gi"), pod("app", "b", "hot", "500m", "1Gi"),
			pod("app", "c", "hot", "500m", "1Gi"), pod("app", "d", "hot", "500m", "1Gi")}, load: standard,
			wantReason: ReasonActing, wantHot: 1, wantCalls: "a>cold1 b>cold1", wantSkips: "c:node_limit d:node_limit"},
		{name: "not hot long enough", nodes: pool(), pods: onHot("a"), load: standard, rounds: 1,
			wantReason: ReasonNothingHot},
		{name: "too few cold nodes", mut: func(s *berthv1alpha1.RebalancerSpec) { s.MinColdNodes = 2 }, nodes: pool(), pods: onHot("a"), load: standard,
			wantReason: ReasonTooFewCold, wantHot: 1},
		{name: "no node selected", nodes: nil, load: standard, wantReason: ReasonNoNodes},
		{name: "stale document stops everything", nodes: pool(), pods: onHot("a"), load: standard, stale: true, wantReason: ReasonNoMetrics},
		{name: "pdb refusal is a skip; the next candidate moves", nodes: pool(), pods: onHot("a", "b", "c"), load: standard,
			answer:     map[string]Outcome{"a": RefusedPDB},
			wantReason: ReasonActing, wantHot: 1, wantCalls: "a>cold1 b>cold1 c>cold2", wantSkips: "a:pdb"},
		{name: "other schedulers' and protected pods stay", nodes: pool(),
			pods: []*corev1.Pod{pod("app", "stock", "hot", "1", "1Gi", scheduler("default-scheduler")), pod("kube-system", "sys", "hot", "1", "1Gi"),
				pod("app", "ds", "hot", "1", "1Gi", owner("DaemonSet", "agent")), pod("app", "ok", "hot", "1", "1Gi")},
			load: standard, wantReason: ReasonActing, wantHot: 1, wantCalls: "ok>cold1",
			wantSkips: "ds:daemonset stock:other_scheduler sys:protected_namespace"},
		{name: "tainted cold nodes refuse a pod without toleration", nodes: pool(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "sim", Effect: corev1.TaintEffectNoSchedule}}
		}), pods: []*corev1.Pod{pod("app", "plain", "hot", "2", "1Gi"), pod("app", "tolerant", "hot", "1", "1Gi", tolerate("sim"))}, load: standard,
			wantReason: ReasonActing, wantHot: 1, wantCalls: "tolerant>cold1", wantSkips: "plain:no_cold_node_fits"},
		{name: "node affinity to the hot node only", nodes: pool(), pods: []*corev1.Pod{pod("app", "pinned", "hot", "2", "1Gi", nodeSelector("kubernetes.io/hostname", "hot")),
			pod("app", "free", "hot", "1", "1Gi")}, load: standard,
			wantReason: ReasonActing, wantHot: 1, wantCalls: "free>cold1", wantSkips: "pinned:no_cold_node_fits"},
		{name: "instance classes keep apart", nodes: pool(), pods: []*corev1.Pod{pod("app", "classA", "hot", "2", "1Gi", label("berth.dev/instance-class", "a")),
			pod("app", "b1", "cold1", "100m", "1Mi", label("berth.dev/instance-class", "b")), pod("app", "b2", "cold2", "100m", "1Mi", label("berth.dev/instance-class", "b"))},
			load: standard, wantReason: ReasonActing, wantHot: 1, wantSkips: "classA:no_cold_node_fits"},
		{name: "requests that overflow the cold node", nodes: []*corev1.Node{node("hot", "10", "100Gi"), node("cold1", "2", "100Gi")},
			pods: []*corev1.Pod{pod("app", "huge", "hot", "3", "1Gi")}, load: map[string][2]float64{"hot": {90, 20}, "cold1": {10, 10}},
			wantReason: ReasonActing, wantHot: 1, wantSkips: "huge:no_cold_node_fits"},
		{name: "use that would make the cold node hot", nodes: []*corev1.Node{node("hot", "10", "100Gi"), node("cold1", "4", "100Gi")},
			// 3 CPU is 75 % of the 4-CPU node already at 25 %: 100 % > 80 %.
			pods: []*corev1.Pod{pod("app", "big", "hot", "3", "1Gi"), pod("app", "small", "hot", "1", "1Gi")}, load: map[string][2]float64{"hot": {90, 20}, "cold1": {25, 10}},
			wantReason: ReasonActing, wantHot: 1, wantCalls: "small>cold1", wantSkips: "big:no_cold_node_fits"},
		{name: "owner in cooldown", nodes: pool(), pods: []*corev1.Pod{pod("app", "a", "hot", "1", "1Gi", owner("ReplicaSet", "web")), pod("app", "b", "hot", "1", "1Gi")},
			load:       standard,
			moves:      []berthv1alpha1.RebalancerMove{{OwnerUID: "web", From: "elsewhere", Time: metav1.NewTime(t0.Add(-time.Minute))}},
			wantReason: ReasonActing, wantHot: 1, wantCalls: "b>cold1", wantSkips: "a:owner_cooldown"},
		{name: "a node that took a moved pod is not drained", nodes: pool(),
			pods:       []*corev1.Pod{pod("app", "new", "hot", "1", "1Gi", owner("ReplicaSet", "web"), created(t0.Add(-30*time.Second))), pod("app", "b", "hot", "1", "1Gi")},
			load:       standard,
			moves:      []berthv1alpha1.RebalancerMove{{OwnerUID: "web", From: "elsewhere", Time: metav1.NewTime(t0.Add(-time.Minute))}},
			wantReason: ReasonNothingHot},
		{name: "metrics older than the last move from the node", nodes: pool(), pods: onHot("a"), load: standard,
			moves:      []berthv1alpha1.RebalancerMove{{OwnerUID: "other", From: "hot", Time: metav1.NewTime(t0.Add(-2 * time.Second))}},
			wantReason: ReasonNothingHot},
		{name: "per owner per round", mut: func(s *berthv1alpha1.RebalancerSpec) { s.Limits.PerNode = 5 }, nodes: pool(),
			pods:       []*corev1.Pod{pod("app", "a", "hot", "1", "1Gi", owner("ReplicaSet", "web")), pod("app", "b", "hot", "1", "1Gi", owner("ReplicaSet", "web")), pod("app", "c", "hot", "1", "1Gi")},
			load:       standard,
			wantReason: ReasonActing, wantHot: 1, wantCalls: "a>cold1 c>cold2", wantSkips: "b:owner_limit"},
		{name: "per namespace per round", mut: func(s *berthv1alpha1.RebalancerSpec) { s.Limits.PerNode, s.Limits.PerNamespace = 5, 1 }, nodes: pool(),
			pods:       []*corev1.Pod{pod("x", "a", "hot", "1", "1Gi"), pod("x", "b", "hot", "1", "1Gi"), pod("y", "c", "hot", "1", "1Gi")},
			load:       standard,
			wantReason: ReasonActing, wantHot: 1, wantCalls: "a>cold1 c>cold2", wantSkips: "b:namespace_limit"},
		{name: "per round across nodes", mut: func(s *berthv1alpha1.RebalancerSpec) { s.Limits.PerRound = 1 },
			nodes: []*corev1.Node{node("hot", "10", "100Gi"), node("hot2", "10", "100Gi"), node("cold1", "10", "100Gi"), node("cold2", "10", "100Gi")},
			pods:  []*corev1.Pod{pod("app", "a", "hot", "1", "1Gi"), pod("app", "z", "hot2", "1", "1Gi")},
			load:  map[string][2]float64{"hot": {95, 20}, "hot2": {85, 10}, "cold1": {10, 10}, "cold2": {20, 10}},
			// The hotter node goes first.
			wantReason: ReasonActing, wantHot: 2, wantCalls: "a>cold1", wantSkips: "z:round_limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy(t, func(s *berthv1alpha1.RebalancerSpec) {
				if tc.mut != nil {
					tc.mut(s)
				}
			})
			var a Anomalies
			ev := &evictions{answer: tc.answer}
			before := p.AnomalyRounds - 1
			if tc.rounds != 0 {
				before = tc.rounds
			}
			for i := 0; i < before; i++ {
				in := &Round{Now: t0.Add(time.Duration(i-before) * time.Minute), Nodes: tc.nodes, Pods: tc.pods, Load: loads(t0.Add(time.Duration(i-before)*time.Minute), tc.load)}
				// Earlier rounds see no cold node, so they count heat without acting.
				noCold := map[string][2]float64{}
				for n, v := range tc.load {
					if v[0] < 30 {
						v = [2]float64{50, 50}
					}
					noCold[n] = v
				}
				in.Load = loads(in.Now, noCold)
				if _, err := p.Plan(ctx, in, &a, fit, ev.evict); err != nil {
					t.Fatal(err)
				}
			}
			if len(ev.calls) != 0 {
				t.Fatalf("evicted before the anomaly rounds: %v", ev.calls)
			}
			l := loads(t0, tc.load)
			if tc.stale {
				l = loads(t0.Add(-time.Hour), tc.load)
			}
			res, err := p.Plan(ctx, &Round{Now: t0, Round: 9, Nodes: tc.nodes, Pods: tc.pods, Load: l, Moves: tc.moves}, &a, fit, ev.evict)
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason != tc.wantReason || res.Hot != tc.wantHot || strings.Join(ev.calls, " ") != tc.wantCalls || skipped(res) != tc.wantSkips {
				t.Fatalf("got reason %s hot %d calls %q skips %q (%s)\nwant reason %s hot %d calls %q skips %q",
					res.Reason, res.Hot, strings.Join(ev.calls, " "), skipped(res), res.Why, tc.wantReason, tc.wantHot, tc.wantCalls, tc.wantSkips)
			}
			if res.Evictions > p.Limits.PerNode*max(res.Hot, 1) {
				t.Fatalf("%d evictions for %d hot nodes", res.Evictions, res.Hot)
			}
		})
	}
}

// TestPlanDryRunSameDecisions: the planner decides the same moves whatever the evictor does
// with them, so dry-run rounds log what a real round does.
func TestPlanDryRunSameDecisions(t *testing.T) {
	ctx := context.Background()
	fit, _ := NewFitter(ctx)
	p := policy(t, func(s *berthv1alpha1.RebalancerSpec) { s.AnomalyRounds = 1 })
	nodes := []*corev1.Node{node("hot", "10", "100Gi"), node("cold", "10", "100Gi")}
	pods := []*corev1.Pod{pod("app", "a", "hot", "1", "1Gi"), pod("app", "b", "hot", "2", "1Gi"), pod("app", "c", "hot", "1", "1Gi", priority(-1))}
	var got []string
	for _, out := range []Outcome{Evicted, DryRunOK} {
		var a Anomalies
		var calls []string
		_, err := p.Plan(ctx, &Round{Now: t0, Nodes: nodes, Pods: pods, Load: loads(t0, map[string][2]float64{"hot": {95, 10}, "cold": {5, 5}})}, &a, fit,
			func(_ context.Context, m Move) (Outcome, error) { calls = append(calls, m.Pod.Name); return out, nil })
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(calls))
	}
	if got[0] != got[1] || got[0] != "[c b]" {
		t.Fatalf("real %s, dry run %s; want [c b] both", got[0], got[1])
	}
}
