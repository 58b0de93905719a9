package placement

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGenerateWorkloads: the workload shape is deterministic per seed, its controllers are
// Deployments and StatefulSets of 1–30 replicas, some scale up, roll out or leave, a fifth of the
// pods are bare, and the end size is the bare scenario's.
func TestGenerateWorkloads(t *testing.T) {
	o := ScenarioOptions{Seed: 3, Nodes: 50, Pods: 600, Waves: 8, Shape: ShapeWorkloads}
	a, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(o)
	if fmt.Sprint(a.Workloads, a.Pods) != fmt.Sprint(b.Workloads, b.Pods) {
		t.Fatal("same seed, different scenario")
	}
	if c, _ := Generate(ScenarioOptions{Seed: 4, Nodes: 50, Pods: 600, Waves: 8, Shape: ShapeWorkloads}); fmt.Sprint(c.Workloads) == fmt.Sprint(a.Workloads) {
		t.Fatal("another seed, same workloads")
	}
	kinds := map[string]int{}
	var scaled, rolled, left, late, wide int
	for _, w := range a.Workloads {
		kinds[w.Kind]++
		if w.Replicas < 1 || w.Replicas > 30 || w.Initial < 1 || w.Initial > w.Replicas {
			t.Fatalf("%s: %d replicas, %d initially: want 1-30 and initial ≤ final", w.Name, w.Replicas, w.Initial)
		}
		if w.ScaleAt >= 0 {
			scaled++
			if w.ScaleAt <= w.Arrive || w.ScaleAt >= o.Waves {
				t.Fatalf("%s scales at wave %d, arrives at %d", w.Name, w.ScaleAt, w.Arrive)
			}
		}
		if w.RolloutAt >= 0 {
			rolled++
			if w.RolloutAt <= w.Arrive || w.RolloutFactor < 0.7 || w.RolloutFactor > 1.4 {
				t.Fatalf("%s rolls out at %d (arrives %d) with factor %v", w.Name, w.RolloutAt, w.Arrive, w.RolloutFactor)
			}
		}
		if w.Leave >= 0 {
			left++
		}
		if w.Arrive > 0 {
			late++
		}
		if w.Replicas >= 12 {
			wide++
		}
	}
	if kinds[KindDeployment] == 0 || kinds[KindStatefulSet] == 0 || scaled == 0 || rolled == 0 || left == 0 || late == 0 || wide == 0 {
		t.Fatalf("mix: %v, %d scaled, %d rolled out, %d deleted, %d arriving later, %d of 12+ replicas: every case must occur",
			kinds, scaled, rolled, left, late, wide)
	}
	if len(a.Pods) != 120 {
		t.Fatalf("%d bare pods, want 20 %% of 600", len(a.Pods))
	}
	// The end size: the bare scenario keeps about 80 % of 600 pods; the workloads 80 % of 80 %.
	if end := a.replicasAtEnd(); end < 384 || end > 384+30 {
		t.Fatalf("%d replicas at the end, want 384 (+ at most one workload's)", end)
	}
}

// TestWorkloadTimeline: replicas and revision per wave follow arrival, scale-up, rollout and
// deletion.
func TestWorkloadTimeline(t *testing.T) {
	w := WorkloadSpec{Arrive: 1, Initial: 2, Replicas: 6, ScaleAt: 3, RolloutAt: 4, Leave: 6}
	tests := []struct{ wave, replicas, revision int }{
		{0, 0, 0}, {1, 2, 0}, {2, 2, 0}, {3, 6, 0}, {4, 6, 1}, {5, 6, 1}, {6, 0, 1},
	}
	for _, tc := range tests {
		if got := w.replicasAt(tc.wave); got != tc.replicas {
			t.Errorf("wave %d: %d replicas, want %d", tc.wave, got, tc.replicas)
		}
		if got := w.revisionAt(tc.wave); got != tc.revision {
			t.Errorf("wave %d: revision %d, want %d", tc.wave, got, tc.revision)
		}
	}
}

// TestBookReplicas: a workload pod's use comes from its workload (alike replicas, the rollout's
// factor after a rollout), the same for the same replica in every run, and never for a pod of an
// unknown workload.
func TestBookReplicas(t *testing.T) {
	sc := &Scenario{Seed: 9, Workloads: []WorkloadSpec{
		{Name: "web", Kind: KindDeployment, ReqMilliCPU: 1000, ReqMemMiB: 1024, UseFrac: 0.2, Spread: 0.1, MemFrac: 0.5, BurstFrac: 0.3, RolloutFactor: 1.4},
		{Name: "db", Kind: KindStatefulSet, ReqMilliCPU: 500, ReqMemMiB: 512, UseFrac: 1.2, Spread: 0.1, MemFrac: 0.5, RolloutFactor: 1},
	}, Pods: []PodSpec{{Name: "bare-1", UseMilliCPU: 77}}}
	pod := func(name, wl, rev string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelWorkload: wl, labelRevision: rev}}}
	}
	b := newBook(sc)
	var old, newer float64
	for i := range 50 {
		p := b.spec(pod(fmt.Sprintf("web-a-%d", i), "web", "0"))
		if p.ReqMilliCPU != 1000 || p.BurstMilliCPU <= 0 || math.Abs(p.UseMilliCPU-200) > 100 {
			t.Fatalf("web replica %d: %+v, want 1000m requested, about 200m used, bursty", i, p)
		}
		old += p.UseMilliCPU / 50
		newer += b.spec(pod(fmt.Sprintf("web-b-%d", i), "web", "1")).UseMilliCPU / 50
	}
	if math.Abs(newer/old-1.4) > 0.1 {
		t.Fatalf("after the rollout the replicas use %.0fm against %.0fm before, want 1.4×", newer, old)
	}
	// Same replica, another run (a new book): the same draw; a StatefulSet pod by its ordinal.
	b2 := newBook(sc)
	if x, y := b.spec(pod("db-3", "db", "0")).UseMilliCPU, b2.spec(pod("db-3", "db", "0")).UseMilliCPU; x != y {
		t.Fatalf("db-3 uses %v in one run and %v in another", x, y)
	}
	if !b.ofWorkload("db-3") || b.ofWorkload("bare-1") {
		t.Fatal("ofWorkload: db-3 is a workload's, bare-1 is not")
	}
	if p := b.spec(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare-1"}}); p == nil || p.UseMilliCPU != 77 {
		t.Fatalf("bare pod: %+v", p)
	}
	if p := b.spec(pod("x-1", "forged", "0")); p != nil {
		t.Fatalf("a pod of no scenario workload got %+v", p)
	}
}

// TestPackingOracle: the packing oracle puts a pod on the fullest node that stays under the
// target with it, falls back to the lowest when none does, and still needs requests to fit.
func TestPackingOracle(t *testing.T) {
	sc := &Scenario{
		Nodes: []NodeSpec{
			{Name: "a", MilliCPU: 4000, MemoryMiB: 8192, BaseCPU: 10},
			{Name: "b", MilliCPU: 4000, MemoryMiB: 8192, BaseCPU: 40},
			{Name: "c", MilliCPU: 4000, MemoryMiB: 8192, BaseCPU: 55},
		},
		Pods: []PodSpec{
			{Name: "small", ReqMilliCPU: 100, ReqMemMiB: 100, UseMilliCPU: 100},  // +2.5 %
			{Name: "medium", ReqMilliCPU: 800, ReqMemMiB: 100, UseMilliCPU: 800}, // +20 %
			{Name: "big", ReqMilliCPU: 2200, ReqMemMiB: 100, UseMilliCPU: 2200},  // +55 %
			{Name: "wide", ReqMilliCPU: 3950, ReqMemMiB: 100, UseMilliCPU: 100},  // requests fill a node
			{Name: "wide2", ReqMilliCPU: 3950, ReqMemMiB: 100, UseMilliCPU: 100}, // ... and another
			{Name: "wide3", ReqMilliCPU: 3950, ReqMemMiB: 100, UseMilliCPU: 100}, // ... and the last
			{Name: "after", ReqMilliCPU: 200, ReqMemMiB: 100, UseMilliCPU: 100},  // fits nowhere then
		},
	}
	tests := []struct {
		name   string
		before []string
		pod    string
		want   string
		load   float64
	}{
		// a 12.5, b 42.5, c 57.5: the fullest under 60 is c.
		{name: "fullest node under the target", pod: "small", want: "c", load: 57.5},
		// a 30, b 60, c 75: b is at the target (counts as under), c over.
		{name: "a node at the target still takes it", pod: "medium", want: "b", load: 60},
		// a 65, b 95, c 110: none under; the lowest, as balancing would.
		{name: "none under the target: the lowest", pod: "big", want: "a", load: 65},
		// After wide on c (its requests fill c): small goes to b, the fullest with room.
		{name: "requests must fit", before: []string{"wide"}, pod: "small", want: "b", load: 42.5},
		{name: "fits nowhere", before: []string{"wide", "wide2", "wide3"}, pod: "after", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle(sc, 0)
			o.packTarget = 60
			for _, p := range tc.before {
				o.choose(p)
			}
			got, load := o.chooseLoad(tc.pod)
			if got != tc.want || (got != "" && math.Abs(load-tc.load) > 1e-9) {
				t.Errorf("chooseLoad(%s) = %q at %.1f %%, want %q at %.1f %%", tc.pod, got, load, tc.want, tc.load)
			}
		})
	}
	// The balancing oracle on the same first case: the lowest node.
	if got := newOracle(sc, 0).choose("small"); got != "a" {
		t.Errorf("balancing oracle chose %q, want a", got)
	}
}

// TestDrift: the prediction's measurement takes out what other pods bound after it, or deleted
// after it, did to the node; the pod itself and other nodes do not count.
func TestDrift(t *testing.T) {
	sc := &Scenario{Nodes: []NodeSpec{{Name: "n", MilliCPU: 4000}, {Name: "m", MilliCPU: 4000}},
		Pods: []PodSpec{{Name: "p", UseMilliCPU: 400}, {Name: "early", UseMilliCPU: 800}, {Name: "later", UseMilliCPU: 200},
			{Name: "elsewhere", UseMilliCPU: 1000}, {Name: "brief", UseMilliCPU: 600}}}
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a := NewAccounting(sc)
	a.Bound("early", "n", at(-5))
	a.Bound("p", "n", at(0))
	a.Bound("later", "n", at(3))     // +5 %
	a.Bound("elsewhere", "m", at(3)) // another node
	a.Gone("early", at(4))           // −20 %
	a.Bound("brief", "n", at(5))     // came and went: nothing
	a.Gone("brief", at(8))
	a.Bound("later", "n", at(6)) // seen again on the same node: one stint
	tests := []struct {
		t1   int
		want float64
	}{{2, 0}, {3, 5}, {4, -15}, {6, 0}, {10, -15}}
	for _, tc := range tests {
		if got := a.Drift("n", "p", t0, at(tc.t1)); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Drift at +%ds = %v, want %v", tc.t1, got, tc.want)
		}
	}
}

// TestPredStat: medians of absolute and signed errors; none gives NaN, not 0.
func TestPredStat(t *testing.T) {
	s := predStat([]float64{-4, 1, 2, 10})
	if s.N != 4 || s.MedianAbs != 3 || s.MedianBias != 1.5 {
		t.Fatalf("predStat = %+v, want N 4, |median| 3, bias 1.5", s)
	}
	if s := predStat(nil); s.N != 0 || !math.IsNaN(s.MedianAbs) {
		t.Fatalf("no errors: %+v", s)
	}
}

// TestGapAndPlots: a run's gap is to its own oracle of the same level and seed (pack to the
// packing oracle, others to the balancing one), and every level gets a PNG.
func TestGapAndPlots(t *testing.T) {
	util := func(vals ...float64) map[string]float64 {
		m := map[string]float64{}
		for i, v := range vals {
			m[fmt.Sprintf("n%d", i)] = v
		}
		return m
	}
	runs := []*RunResult{
		{Level: "25 % wl", Key: "oracle", Seed: 1, MaxOvershoot: 2, NodesWithPods: 4, Util: util(30, 30, 30, 30)},
		{Level: "25 % wl", Key: "oracle-pack", Seed: 1, MaxOvershoot: 5, NodesWithPods: 2, Util: util(60, 60, 0, 0)},
		{Level: "25 % wl", Key: "pack", Seed: 1, MaxOvershoot: 9, NodesWithPods: 3, Util: util(75, 45, 0, 0)},
		{Level: "25 % wl", Key: "default", Seed: 1, MaxOvershoot: 3, NodesWithPods: 4, Util: util(35, 30, 25, 30)},
		{Level: "25 % bare", Key: "pack", Seed: 1, MaxOvershoot: 1, NodesWithPods: 4, Util: util(30, 30, 30, 30)},
	}
	tb := &Table{Options: TableOptions{Nodes: 4, Seeds: []uint64{1}}, Runs: runs}
	tb.Options.Target = 60
	want := map[string]string{
		"25 % wl/oracle":      "–",
		"25 % wl/pack":        "+4.0 / -25 / -50", // 9 − 5; freed 25 % less; near share 1/4 against 2/4
		"25 % wl/default":     "+1.0 / +0 / +0",
		"25 % bare/pack":      "–", // no oracle ran at that level
		"25 % wl/oracle-pack": "–",
	}
	for _, row := range tb.Rows() {
		if got := tb.gap(row); got != want[row.Level+"/"+row.Key] {
			t.Errorf("gap(%s/%s) = %q, want %q", row.Level, row.Key, got, want[row.Level+"/"+row.Key])
		}
	}
	files, err := tb.WritePlots(t.TempDir())
	if err != nil || len(files) != 2 {
		t.Fatalf("WritePlots: %v, %v: want two files", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
			t.Fatalf("%s is not a PNG (%v)", f, err)
		}
	}
	if c := tb.Rows()[2].SortedCurve(4); fmt.Sprint(c) != "[75 45 0 0]" {
		t.Fatalf("sorted curve %v, want hottest first", c)
	}
}

// TestGenerateGrowth: the growth shape's workloads are the workload shape's draws already
// running when they scale: each arrives in the first two waves with a third of its replicas
// (at least one), scales to all of them from the fourth wave on, never rolls out or leaves, and
// most workload pods come with those scale-ups (the pods a profile can be learned for).
func TestGenerateGrowth(t *testing.T) {
	o := ScenarioOptions{Seed: 3, Nodes: 50, Pods: 600, Waves: 8, Shape: ShapeGrowth}
	s, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Workloads) == 0 || len(s.Pods) == 0 {
		t.Fatalf("%d workloads, %d bare pods: want both", len(s.Workloads), len(s.Pods))
	}
	var initial, later int
	for _, w := range s.Workloads {
		if w.Arrive > 1 || w.RolloutAt >= 0 || w.Leave >= 0 {
			t.Fatalf("%s arrives at %d, rolls out at %d, leaves at %d: want arrival in waves 0-1, no rollout, no deletion", w.Name, w.Arrive, w.RolloutAt, w.Leave)
		}
		switch {
		case w.Replicas == 1:
			if w.ScaleAt >= 0 || w.Initial != 1 {
				t.Fatalf("%s: one replica, scales at %d from %d", w.Name, w.ScaleAt, w.Initial)
			}
		case w.ScaleAt < 3 || w.ScaleAt >= o.Waves || w.Initial != max(1, w.Replicas/3):
			t.Fatalf("%s: %d of %d replicas, scales at %d: want a third, then all from wave 3 on", w.Name, w.Initial, w.Replicas, w.ScaleAt)
		}
		initial += w.Initial
		later += w.Replicas - w.Initial
	}
	if later <= initial {
		t.Fatalf("%d replicas come with scale-ups, %d at arrival: want most with scale-ups", later, initial)
	}
	if _, err := Generate(ScenarioOptions{Seed: 3, Nodes: 5, Pods: 10, Waves: 8, Shape: "grow"}); err == nil || !strings.Contains(err.Error(), `unknown shape "grow" (workloads, growth, bare)`) {
		t.Fatalf("unknown shape: %v", err)
	}
}
