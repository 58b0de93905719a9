package placement

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestAccounting pins the simulator's ledger: a node's load is its base plus the use of the
// pods running on it, nothing else — otherwise the benchmark would measure nothing (or the
// wrong thing) while printing a plausible table.
func TestAccounting(t *testing.T) {
	sc := &Scenario{
		Nodes: []NodeSpec{
			{Name: "a", MilliCPU: 4000, MemoryMiB: 8192, BaseCPU: 10, BaseMemory: 20},
			{Name: "b", MilliCPU: 8000, MemoryMiB: 16384, BaseCPU: 5, BaseMemory: 10},
		},
		Pods: []PodSpec{
			{Name: "p1", UseMilliCPU: 400, UseMemMiB: 819.2},
			{Name: "p2", UseMilliCPU: 1000, UseMemMiB: 1638.4},
			{Name: "p3", UseMilliCPU: 4000, UseMemMiB: 0},
			{Name: "bursty", UseMilliCPU: 800, BurstMilliCPU: 400},
		},
	}
	type step struct {
		place  map[string]string // pod → node
		remove []string
	}
	tests := []struct {
		name                string
		steps               []step
		node                string
		cpu, mem, demand    float64
		running             []string
		expectedCPU, expMem float64
	}{
		{name: "no pods: base load", node: "a", cpu: 10, mem: 20, demand: 10, expectedCPU: 10, expMem: 20},
		{name: "one pod adds its use", steps: []step{{place: map[string]string{"p1": "a"}}}, node: "a",
			cpu: 20, mem: 30, demand: 20, running: []string{"p1"}, expectedCPU: 20, expMem: 30},
		{name: "pods on another node do not count", steps: []step{{place: map[string]string{"p1": "a", "p2": "b"}}}, node: "a",
			cpu: 20, mem: 30, demand: 20, running: []string{"p1"}, expectedCPU: 20, expMem: 30},
		{name: "the other node gets its own pods", steps: []step{{place: map[string]string{"p1": "a", "p2": "b"}}}, node: "b",
			cpu: 5 + 12.5, mem: 20, demand: 17.5, running: []string{"p2"}, expectedCPU: 17.5, expMem: 20},
		{name: "a removed pod stops counting", steps: []step{{place: map[string]string{"p1": "a", "p2": "a"}}, {remove: []string{"p1"}}}, node: "a",
			cpu: 35, mem: 40, demand: 35, running: []string{"p2"}, expectedCPU: 35, expMem: 40},
		{name: "a moved pod counts on its new node only", steps: []step{{place: map[string]string{"p2": "a"}}, {place: map[string]string{"p2": "b"}}}, node: "a",
			cpu: 10, mem: 20, demand: 10, expectedCPU: 10, expMem: 20},
		{name: "overcommitted: CPU saturates at 100, demand does not", steps: []step{{place: map[string]string{"p2": "a", "p3": "a"}}}, node: "a",
			cpu: 100, mem: 40, demand: 135, running: []string{"p2", "p3"}, expectedCPU: 100, expMem: 40},
		{name: "unknown pods and nodes are ignored", steps: []step{{place: map[string]string{"agent-pod": "a", "p1": "nowhere"}}}, node: "a",
			cpu: 10, mem: 20, demand: 10, expectedCPU: 10, expMem: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAccounting(sc)
			for _, s := range tt.steps {
				for p, n := range s.place {
					a.Place(p, n)
				}
				for _, p := range s.remove {
					a.Remove(p)
				}
			}
			cpu, mem, demand := a.Load(tt.node)
			if !near(cpu, tt.cpu) || !near(mem, tt.mem) || !near(demand, tt.demand) {
				t.Errorf("Load(%s) = cpu %v mem %v demand %v, want %v %v %v", tt.node, cpu, mem, demand, tt.cpu, tt.mem, tt.demand)
			}
			if got := a.Running(tt.node); strings.Join(got, ",") != strings.Join(tt.running, ",") {
				t.Errorf("Running(%s) = %v, want %v", tt.node, got, tt.running)
			}
			ec, em := a.Expected(tt.node)
			if !near(ec, tt.expectedCPU) || !near(em, tt.expMem) {
				t.Errorf("Expected(%s) = %v %v, want %v %v", tt.node, ec, em, tt.expectedCPU, tt.expMem)
			}
		})
	}

	t.Run("bursty use varies around its mean with its standard deviation", func(t *testing.T) {
		a := NewAccounting(sc)
		a.Place("bursty", "b")
		rng := rand.New(rand.NewPCG(1, 2))
		var sum, sq float64
		const n = 20000
		for range n {
			a.Redraw(rng)
			cpu, _, _ := a.Load("b")
			use := (cpu - 5) / 100 * 8000 // back to millicores
			sum += use
			sq += use * use
		}
		mean := sum / n
		std := math.Sqrt(sq/n - mean*mean)
		// Clipping at 0 is 2 σ below the mean here, so the moments stay within a few %.
		if math.Abs(mean-800) > 20 || math.Abs(std-400) > 25 {
			t.Errorf("bursty pod: mean %.1f std %.1f millicores, want about 800 and 400", mean, std)
		}
		if ec, _ := a.Expected("b"); !near(ec, 15) {
			t.Errorf("Expected ignores the burst draw: got %v, want 15", ec)
		}
	})
}

func TestGenerate(t *testing.T) {
	tests := []struct {
		name      string
		o         ScenarioOptions
		wantErr   string
		oversized bool
	}{
		{name: "default mix", o: ScenarioOptions{Seed: 1, Nodes: 50, Pods: 600, Waves: 10}},
		{name: "pods bigger than any node", o: ScenarioOptions{Seed: 1, Nodes: 5, Pods: 40, Waves: 2, PodScale: 20}, oversized: true},
		{name: "no nodes", o: ScenarioOptions{Seed: 1, Pods: 10, Waves: 1}, wantErr: "must be positive"},
		{name: "negative scale", o: ScenarioOptions{Seed: 1, Nodes: 1, Pods: 1, Waves: 1, PodScale: -1}, wantErr: "negative"},
		{name: "leave share above 1", o: ScenarioOptions{Seed: 1, Nodes: 1, Pods: 1, Waves: 1, LeaveShare: 2}, wantErr: "outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Generate(tt.o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Generate(tt.o)
			for i := range s.Pods {
				if s.Pods[i] != again.Pods[i] {
					t.Fatalf("same seed, different pod %d: %+v vs %+v", i, s.Pods[i], again.Pods[i])
				}
			}
			if got := len(s.Oversized()) > 0; got != tt.oversized {
				t.Errorf("oversized pods: %v, want %v", s.Oversized(), tt.oversized)
			}
			waves := map[int]int{}
			for _, p := range s.Pods {
				waves[p.Arrive]++
				if p.Leave >= 0 && (p.Leave <= p.Arrive || p.Leave >= tt.o.Waves) {
					t.Errorf("%s arrives at wave %d and leaves at %d", p.Name, p.Arrive, p.Leave)
				}
				if p.UseMilliCPU <= 0 || p.ReqMilliCPU <= 0 {
					t.Errorf("%s has no use or request: %+v", p.Name, p)
				}
			}
			if len(waves) != tt.o.Waves {
				t.Errorf("pods arrive in %d waves, want %d", len(waves), tt.o.Waves)
			}
		})
	}
	t.Run("the default mix over- and under-requests and has bursty pods", func(t *testing.T) {
		s, _ := Generate(ScenarioOptions{Seed: 7, Nodes: 50, Pods: 600, Waves: 10})
		classes := map[string]int{}
		bursty, leave := 0, 0
		for _, p := range s.Pods {
			classes[p.Class]++
			if p.BurstMilliCPU > 0 {
				bursty++
			}
			if p.Leave >= 0 {
				leave++
			}
			if p.Class == "under" && p.UseMilliCPU <= float64(p.ReqMilliCPU) || p.Class == "over" && p.UseMilliCPU >= float64(p.ReqMilliCPU) {
				t.Errorf("%s: class %s but uses %.0f of %d", p.Name, p.Class, p.UseMilliCPU, p.ReqMilliCPU)
			}
		}
		if classes["over"] < 300 || classes["under"] < 30 || classes["right"] < 60 || bursty < 100 || leave < 50 {
			t.Errorf("mix: %v, %d bursty, %d leave", classes, bursty, leave)
		}
		sizes := map[int64]bool{}
		for _, n := range s.Nodes {
			sizes[n.MilliCPU] = true
		}
		if len(sizes) != 3 {
			t.Errorf("node sizes %v, want 3", sizes)
		}
	})
}

// TestRender: every berth run's configuration is what the operator would deploy (it passes
// schedconfig.Validate), with the plugins and arguments the run names.
func TestRender(t *testing.T) {
	for _, rc := range catalog {
		if !rc.Berth() {
			continue
		}
		t.Run(rc.Key, func(t *testing.T) {
			y, err := rc.render("http://127.0.0.1:2020", Timing{RefreshSeconds: 1, ProfileMinAgeSeconds: 4})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := schedconfig.Validate([]byte(y)); err != nil {
				t.Fatalf("%v\n%s", err, y)
			}
			// why: the workload profiles learn on the bench's time scale, and the no-profile
			// arm is the same preset with them off.
			if !strings.Contains(y, "minAgeSeconds: 4") {
				t.Errorf("workloadProfiles.minAgeSeconds not rendered:\n%s", y)
			}
			if got, want := strings.Contains(y, "enabled: false"), rc.noProfiles; got != want {
				t.Errorf("profiles off %v, want %v:\n%s", got, want, y)
			}
			if got, want := strings.Contains(y, "namespaceMinPods: 10"), rc.namespaceMinPods == 10; got != want {
				t.Errorf("namespace ratios off rendered %v, want %v:\n%s", got, want, y)
			}
			// disableDefaultScore drops the implicit spreading; pack-spread keeps it.
			if got, want := strings.Contains(y, "defaultingType: List"), strings.Contains(rc.Plugins, "disableDefaultScore: true") && !rc.implicitSpreading; got != want {
				t.Errorf("implicit spreading dropped %v, want %v:\n%s", got, want, y)
			}
			if got, want := strings.Contains(y, "minSiblings: 2"), rc.minSiblings == 2; got != want {
				t.Errorf("minSiblings 2 rendered %v, want %v:\n%s", got, want, y)
			}
			for _, want := range []string{"leaderElect: false", "refreshIntervalSeconds: 1", "schedulerName: " + SchedulerName, rc.WaitPlugin} {
				if !strings.Contains(y, want) {
					t.Errorf("missing %q in\n%s", want, y)
				}
			}
			if got, want := strings.Contains(y, "usageThresholds"), len(rc.thresholds) > 0; got != want {
				t.Errorf("usageThresholds present %v, want %v", got, want)
			}
			if got, want := strings.Contains(y, "NodeResourcesBalancedAllocation"), strings.HasSuffix(rc.Key, "nds") || strings.HasPrefix(rc.Key, "pack"); got != want {
				t.Errorf("default score disabled %v, want %v", got, want)
			}
		})
	}
	if _, err := Runs([]string{"tlp40", "nope"}); err == nil || !strings.Contains(err.Error(), "unknown run") {
		t.Errorf("unknown run accepted: %v", err)
	}
}

// TestChartRun: the "chart" run is what charts/berth/values.yaml says, not a copy of it.
func TestRunKeysResolve(t *testing.T) {
	keys := RunKeys()
	rcs, err := Runs(keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(rcs) != len(catalog)+1 || keys[len(keys)-1] != "chart" {
		t.Fatalf("%d runs from %d keys %v", len(rcs), len(keys), keys)
	}
	for i, rc := range rcs[:len(catalog)] {
		if rc.Key != keys[i] {
			t.Errorf("key %q resolved to %q", keys[i], rc.Key)
		}
	}
}

func TestChartRun(t *testing.T) {
	rc, err := ChartRun()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.render("http://127.0.0.1:2020", Timing{RefreshSeconds: 1}); err != nil {
		t.Fatalf("the chart's own values do not render: %v", err)
	}
	yes, no := true, false
	var v chartValues
	v.Scheduler.Plugins.TargetLoadPacking.Weight = 3
	v.Scheduler.Plugins.TargetLoadPacking.TargetUtilization = 55
	v.Scheduler.Plugins.TargetLoadPacking.DefaultRequestsMultiplier = "1.5"
	v.Scheduler.Plugins.LoadVariationRiskBalancing.Weight = 1
	v.Scheduler.Plugins.LoadVariationRiskBalancing.SafeVarianceMargin = "1"
	v.Scheduler.Plugins.LoadVariationRiskBalancing.SafeVarianceSensitivity = "1"
	tests := []struct {
		name    string
		mutate  func(*chartValues)
		want    []string
		notWant []string
		name2   string
		wantErr string
	}{
		{name: "no mode: pack", mutate: func(*chartValues) {},
			want: []string{"targetUtilization: 55", "NodeResourcesBalancedAllocation"}, notWant: []string{"LoadVariationRiskBalancing", "usageThresholds"}, name2: "chart pack: TLP 55+noDefScore"},
		{name: "pack: TLP alone, no default scores, no filter", mutate: func(v *chartValues) { v.Scheduler.LoadAware.Mode = "pack" },
			// disableDefaultScore renders the upstream score plugins in the disabled list.
			want:    []string{"targetUtilization: 55", "weight: 3", "NodeResourcesBalancedAllocation"},
			notWant: []string{"LoadVariationRiskBalancing", "usageThresholds"}, name2: "chart pack: TLP 55+noDefScore"},
		{name: "pack with own thresholds", mutate: func(v *chartValues) {
			v.Scheduler.LoadAware.Mode = "pack"
			v.Scheduler.LoadAware.UsageThresholds = map[string]int{"cpu": 70}
		},
			want: []string{"cpu: 70"}, notWant: []string{"memory", "LoadVariationRiskBalancing"}, name2: "chart pack: TLP 55+noDefScore+filter"},
		{name: "balance: TLP and LVRB next to the default scores, no filter", mutate: func(v *chartValues) { v.Scheduler.LoadAware.Mode = "balance" },
			want: []string{"LoadVariationRiskBalancing"}, notWant: []string{"usageThresholds", "NodeResourcesBalancedAllocation"}, name2: "chart balance: TLP 55+LVRB"},
		{name: "explicit switches win over the mode", mutate: func(v *chartValues) {
			v.Scheduler.LoadAware.Mode = "balance"
			v.Scheduler.Plugins.LoadVariationRiskBalancing.Enabled = &no
			v.Scheduler.Plugins.DisableDefaultScore = &yes
			v.Scheduler.LoadAware.UsageThresholds = map[string]int{"cpu": 85}
		}, want: []string{"cpu: 85", "NodeResourcesBalancedAllocation"}, notWant: []string{"LoadVariationRiskBalancing"}, name2: "chart balance: TLP 55+noDefScore+filter"},
		{name: "pack without TargetLoadPacking keeps the upstream scores", mutate: func(v *chartValues) {
			v.Scheduler.Plugins.TargetLoadPacking.Enabled = &no
			v.Scheduler.Plugins.LoadVariationRiskBalancing.Enabled = &yes
		}, want: []string{"LoadVariationRiskBalancing"}, notWant: []string{"NodeResourcesBalancedAllocation", "targetLoadPacking"}, name2: "chart pack: LVRB"},
		{name: "pack with a variance margin", mutate: func(v *chartValues) {
			v.Scheduler.Plugins.TargetLoadPacking.VarianceMargin = "1.5"
		}, want: []string{`varianceMargin: "1.5"`}, name2: "chart pack: TLP 55+margin 1.5σ+noDefScore"},
		{name: "unknown mode", mutate: func(v *chartValues) { v.Scheduler.LoadAware.Mode = "spread" }, wantErr: "want pack or balance"},
		{name: "no load-aware plugin", mutate: func(v *chartValues) {
			v.Scheduler.Plugins.TargetLoadPacking.Enabled = &no
			v.Scheduler.Plugins.LoadVariationRiskBalancing.Enabled = &no
		}, wantErr: "neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vv := v
			tt.mutate(&vv)
			rc, err := chartRunFrom(vv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			y, err := rc.render("http://127.0.0.1:2020", Timing{RefreshSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(y, w) {
					t.Errorf("missing %q in\n%s", w, y)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(y, w) {
					t.Errorf("unexpected %q in\n%s", w, y)
				}
			}
			if rc.Name != tt.name2 {
				t.Errorf("name %q, want %q", rc.Name, tt.name2)
			}
		})
	}
}

// TestPrintReportsFailures: a run whose watcher died and whose pods could not all be placed
// says so in the table and its notes.
func TestPrintReportsFailures(t *testing.T) {
	sc, _ := Generate(ScenarioOptions{Seed: 1, Nodes: 4, Pods: 20, Waves: 2, PodScale: 20})
	p := newPoller("http://unused", sc, time.Now())
	p.polls, p.failed, p.firstFail, p.lastErr = 10, 4, 7e9, errString("connection refused")
	p.recent = []map[string]float64{{sc.Nodes[0].Name: 41, sc.Nodes[1].Name: 95}}
	p.hot[sc.Nodes[1].Name] = 30
	p.lastAvg = map[string]float64{sc.Nodes[0].Name: 30, sc.Nodes[1].Name: 80}
	r := &RunResult{Name: "TLP 40", Waves: 2, WavesRun: 2, Unplaced: 3, Oversized: len(sc.Oversized())}
	p.finish(r, 1e9)
	res := &Result{Scenario: sc, Runs: []*RunResult{r}}
	res.Options.Defaults()
	var b bytes.Buffer
	res.Print(&b)
	out := b.String()
	for _, want := range []string{
		"watcher unreachable in 4 of 10 polls from 7 s (connection refused)",
		"2 nodes without load data",
		"4/10", // polls failed column
		"oversized)",
		"no scheduler can place them",
		"  40–50  % | # ",
		"25 %", // 1 of 4 nodes within ±10 of 40
		"trails Latest CPU by 13.0 points on average, 15.0 at most",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if r.HotNodes != 1 || !near(r.HotNodeMinutes, 0.5) {
		t.Errorf("hot: %d nodes %.2f min, want 1 and 0.5", r.HotNodes, r.HotNodeMinutes)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestDefaultTargetIsTheChart's: the table measures against, and its presets pack to, the
// target the chart ships; a chart change without the bench's would compare the wrong thing.
func TestDefaultTargetIsTheChart(t *testing.T) {
	v, err := readChartValues()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Scheduler.Plugins.TargetLoadPacking.TargetUtilization; got != DefaultTarget {
		t.Fatalf("charts/berth/values.yaml targetUtilization %d, DefaultTarget %d", got, DefaultTarget)
	}
	for _, key := range TableRuns[1:] {
		rcs, err := Runs([]string{key})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("targetUtilization: %d", DefaultTarget); !strings.Contains(rcs[0].Plugins, want) {
			t.Errorf("%s does not pack to the chart's target (%s):%s", key, want, rcs[0].Plugins)
		}
	}
}

func TestBreakdown(t *testing.T) {
	sc := &Scenario{
		Nodes: []NodeSpec{{Name: "a", MilliCPU: 4000, BaseCPU: 10}, {Name: "b", MilliCPU: 8000, BaseCPU: 5}},
		Pods: []PodSpec{
			{Name: "over", ReqMilliCPU: 1000, UseMilliCPU: 200, Class: "over"},
			{Name: "under", ReqMilliCPU: 400, UseMilliCPU: 600, Class: "under"},
			{Name: "bursty", ReqMilliCPU: 800, UseMilliCPU: 400, BurstMilliCPU: 100, Class: "right"},
		},
	}
	tests := []struct {
		name  string
		place map[string]string
		dev   float64 // the bursty pod's deviation
		node  string
		want  Breakdown
	}{
		{name: "empty node: base only", node: "a", want: Breakdown{Base: 10, Mean: 10}},
		{name: "unknown node: nothing", node: "zz", want: Breakdown{}},
		{name: "requests, mean use and the under-requesting pod", place: map[string]string{"over": "a", "under": "a"}, node: "a",
			want: Breakdown{Pods: 2, Base: 10, Requested: 35, Mean: 30, Under: 15}},
		{name: "a burst below its mean counts negative", place: map[string]string{"bursty": "b", "over": "a"}, dev: -200, node: "b",
			want: Breakdown{Pods: 1, Base: 5, Requested: 10, Mean: 10, Burst: -2.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAccounting(sc)
			for p, n := range tc.place {
				a.Place(p, n)
			}
			if tc.dev != 0 {
				a.dev["bursty"] = tc.dev
			}
			if got := a.Breakdown(tc.node); got != tc.want {
				t.Errorf("Breakdown(%s) = %+v, want %+v", tc.node, got, tc.want)
			}
		})
	}
}
