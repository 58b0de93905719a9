package placement

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOvershootFigures: overshoot is measured from max(target, the nodes' mean), over every
// answer and at the end, and time above ref+20 is in real-cluster minutes.
func TestOvershootFigures(t *testing.T) {
	sc, _ := Generate(ScenarioOptions{Seed: 1, Nodes: 3, Pods: 3, Waves: 1})
	a, b, c := sc.Nodes[0].Name, sc.Nodes[1].Name, sc.Nodes[2].Name
	p := newPoller("http://unused", sc, time.Now())
	p.target, p.timeScale = 40, 0.1
	// Answer 1: mean 30 < target, hottest 65: 25 over, 5 over ref+20 for 2 s.
	// Answer 2: mean 60 > target, hottest 70: 10 over the mean, none over ref+20.
	p.lastAvg = map[string]float64{a: 48}
	for _, ans := range []map[string]float64{{a: 65, b: 15, c: 10}, {a: 70, b: 55, c: 55}} {
		p.observe(ans, 2)
		p.lastAvg = map[string]float64{a: 50}
	}
	r := &RunResult{}
	p.finish(r, time.Second)
	if !near(r.MaxOvershoot, 25) {
		t.Errorf("max overshoot %.1f, want 25", r.MaxOvershoot)
	}
	// The note names the answer that set it (the first), with the average served beside it.
	if want := fmt.Sprintf("hottest moment: %s (%d CPUs) at 0 s, Latest", a, sc.Nodes[0].MilliCPU/1000) + " CPU 65.0 % (25.0 over), window average 48.0 %"; !slices.Contains(r.Notes, want) {
		t.Errorf("notes %q lack %q", r.Notes, want)
	}
	// With the ledger wired, the note also says what made up the hottest node's load then.
	p2 := newPoller("http://unused", sc, time.Now())
	p2.target = 40
	asked := []string{}
	p2.ledger = func(node string) Breakdown {
		asked = append(asked, node)
		return Breakdown{Pods: 3, Base: 10, Requested: 90, Mean: 55, Under: 20, Burst: 5}
	}
	p2.observe(map[string]float64{a: 50, b: 15}, 1) // a: 10 over 40
	p2.observe(map[string]float64{a: 20, b: 70}, 1) // b: 25 over the mean 45, a new record
	r2 := &RunResult{}
	p2.finish(r2, time.Second)
	if !slices.Equal(asked, []string{a, b}) {
		t.Errorf("ledger read for %v, want each record's node (%s, %s)", asked, a, b)
	}
	if !slices.ContainsFunc(r2.Notes, func(n string) bool {
		return strings.HasPrefix(n, "hottest moment: "+b) && strings.HasSuffix(n, "ledger then: 3 pods, 90 % requested, base 10 + mean use 45 = 55 % (under-requesting pods 20), bursts +5")
	}) {
		t.Errorf("notes %q lack the ledger of the hottest node", r2.Notes)
	}
	// 2 s of bench time at scale 0.1 are 20 s of a real cluster.
	if !near(r.MinutesOver20, 20.0/60) {
		t.Errorf("minutes over ref+20 %.3f, want %.3f", r.MinutesOver20, 20.0/60)
	}
	// End: mean of the two answers per node (67.5, 35, 32.5): mean 45, hottest 22.5 over.
	if !near(r.EndOvershoot, 22.5) {
		t.Errorf("end overshoot %.1f, want 22.5", r.EndOvershoot)
	}
}

// TestTableRowsAndSpread: rows group runs by level and run over seeds; each figure is the mean
// with [min–max].
func TestTableRowsAndSpread(t *testing.T) {
	mk := func(level, key string, seed uint64, withPods int, util float64) *RunResult {
		return &RunResult{Level: level, Key: key, Name: key, Seed: seed, NodesWithPods: withPods,
			Util: map[string]float64{"a": util, "b": util, "c": 0, "d": 0}}
	}
	tab := &Table{Runs: []*RunResult{
		mk("25 %", "pack", 1, 2, 40), mk("25 %", "default", 1, 4, 20),
		mk("25 %", "pack", 2, 3, 45), mk("25 %", "default", 2, 4, 20),
	}}
	tab.Options.Nodes, tab.Options.Target, tab.Options.Seeds = 4, 40, []uint64{1, 2}
	tab.Options.Levels = Levels[:1]
	tab.Options.Defaults()
	rows := tab.Rows()
	if len(rows) != 2 || rows[0].Key != "pack" || len(rows[0].Runs) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	if f := rows[0].Freed(4); !near(f.mean, 37.5) || !near(f.lo, 25) || !near(f.hi, 50) {
		t.Errorf("freed %+v, want 37.5 [25–50]", f)
	}
	if n := rows[0].NearShare(40, 4); !near(n.mean, 50) {
		t.Errorf("near share %+v, want 50 (2 of 4 nodes within ±10 of 40 in both seeds)", n)
	}
	var out bytes.Buffer
	tab.PrintTable(&out)
	for _, want := range []string{"38 [25–50]", "50", "seeds [1 2]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPodShares: the pods' cgroup shares add up to the node's load above base, and a
// saturated node shares what it has left in proportion.
func TestPodShares(t *testing.T) {
	sc := &Scenario{Nodes: []NodeSpec{{Name: "n", MilliCPU: 1000, MemoryMiB: 1000, BaseCPU: 20}},
		Pods: []PodSpec{{Name: "p", UseMilliCPU: 300, UseMemMiB: 100}, {Name: "q", UseMilliCPU: 500, UseMemMiB: 50}, {Name: "x", UseMilliCPU: 100}}}
	a := NewAccounting(sc)
	a.SetUID("p", "uid-p")
	a.SetUID("q", "uid-q")
	a.Place("p", "n")
	a.Place("x", "n") // no UID known: no cgroup
	got := a.PodShares("n")
	if len(got) != 1 || got[0] != (PodShare{UID: "uid-p", CPU: 30, Memory: 10}) {
		t.Fatalf("shares %+v", got)
	}
	a.Place("q", "n") // 20 + 30 + 50 + 10 (x) = 110 % demand: p and q share the 80 left of their 80 asked
	got = a.PodShares("n")
	if len(got) != 2 || !near(got[0].CPU, 30) || !near(got[1].CPU, 50) {
		t.Fatalf("shares %+v", got)
	}
	a.Remove("x")
	a.pods["q"].UseMilliCPU = 700 // demand 20 + 30 + 70 = 120 %: 80 points shared 30:70
	got = a.PodShares("n")
	if !near(got[0].CPU, 24) || !near(got[1].CPU, 56) {
		t.Fatalf("saturated shares %+v, want 24 and 56", got)
	}
}
