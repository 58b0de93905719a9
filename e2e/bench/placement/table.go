package placement

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Level is one load level of the realistic table: how the seed's pods and base loads are
// scaled so that about Used % of the cluster's CPU is in use at the end.
type Level struct {
	Name string
	// PodScale and BaseShift are ScenarioOptions'.
	PodScale, BaseShift float64
}

// Levels are the table's load levels (about 25, 40 and 60 % of CPU used at the end with the
// default 50 nodes and 600 pods; the header prints each scenario's own figure). The busy level
// raises the nodes' own load too: its pods alone at that use would request more CPU than the
// cluster has (requests are about twice the use), and no scheduler could place them.
var Levels = []Level{
	{Name: "25 %", PodScale: 0.5},
	{Name: "40 %", PodScale: 1.05},
	{Name: "60 %", PodScale: 1.35, BaseShift: 14},
}

// TableOptions size the realistic table: every level × seed × run, then the burst.
type TableOptions struct {
	Options
	Nodes, Pods, Waves int
	Seeds              []uint64
	Levels             []Level
	// Shapes are the scenario shapes every level runs with (ShapeWorkloads, ShapeBare; default
	// bare).
	Shapes []string
	// Burst is the number of identical pods created at once in the burst scenario (0: none),
	// run with the first seed's nodes at their base load.
	Burst int
}

// Table is the realistic benchmark's result.
type Table struct {
	Options TableOptions
	// Scenarios are each (level, seed)'s scenario, by "level/seed"; Burst the burst's.
	Scenarios map[string]*Scenario
	Burst     *Scenario
	Runs      []*RunResult
	// Elapsed is the whole table's wall time.
	Elapsed time.Duration
}

// BurstLevel names the burst rows.
const BurstLevel = "burst"

// ExecuteTable runs the realistic table on one cluster: the node set is the first seed's (node
// sizes stay, so seeds compare like for like), and each seed draws its own pods, uses, waves and
// base loads; every shape runs every level.
func ExecuteTable(ctx context.Context, o TableOptions) (*Table, error) {
	o.Defaults()
	if len(o.Seeds) == 0 || len(o.Runs) == 0 {
		return nil, fmt.Errorf("table: no seeds or no runs")
	}
	if len(o.Shapes) == 0 {
		o.Shapes = []string{ShapeBare}
	}
	if o.WavePause <= o.ReportInterval+time.Duration(o.RefreshSeconds)*time.Second {
		return nil, fmt.Errorf("wave pause %s must exceed the report interval (%s) plus the scheduler's refresh (%ds)",
			o.WavePause, o.ReportInterval, o.RefreshSeconds)
	}
	nodes, err := Generate(ScenarioOptions{Seed: o.Seeds[0], Nodes: o.Nodes, Pods: 1, Waves: 1})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	b, err := startBench(ctx, o.Options, nodes)
	if err != nil {
		return nil, err
	}
	defer b.close()
	tr := &tableRun{o: o, b: b, nodes: nodes, t: &Table{Options: o, Scenarios: map[string]*Scenario{}}}
	tr.total = len(o.Shapes) * len(o.Levels) * len(o.Seeds) * len(o.Runs)
	if o.Burst > 0 {
		tr.total += len(o.Runs)
	}
	err = tr.all(ctx)
	tr.t.Elapsed = time.Since(start)
	return tr.t, err
}

// tableRun is one ExecuteTable in progress.
type tableRun struct {
	o           TableOptions
	b           *bench
	nodes       *Scenario
	t           *Table
	done, total int
}

// gen generates a scenario on the table's node sizes.
func (tr *tableRun) gen(so ScenarioOptions) (*Scenario, error) {
	sc, err := Generate(so)
	if err != nil {
		return nil, err
	}
	for i := range sc.Nodes {
		sc.Nodes[i].MilliCPU, sc.Nodes[i].MemoryMiB = tr.nodes.Nodes[i].MilliCPU, tr.nodes.Nodes[i].MemoryMiB
	}
	return sc, nil
}

// one runs sc with rc as the table cell level.
func (tr *tableRun) one(ctx context.Context, sc *Scenario, level string, rc RunConfig) error {
	tr.done++
	tr.o.Logf("run %d/%d: %s, seed %d, %s", tr.done, tr.total, level, sc.Seed, rc.Name)
	r, err := tr.b.run(ctx, tr.o.Options, sc, rc)
	if err != nil {
		return fmt.Errorf("%s, seed %d, %s: %w", level, sc.Seed, rc.Name, err)
	}
	r.Level, r.Seed = level, sc.Seed
	tr.o.Logf("%s: %s", rc.Name, r.summary())
	tr.t.Runs = append(tr.t.Runs, r)
	return nil
}

// all runs every shape × level × seed × run, then the burst.
func (tr *tableRun) all(ctx context.Context) error {
	o := tr.o
	for _, shape := range o.Shapes {
		for _, lv := range o.Levels {
			level := LevelName(lv, shape)
			for _, seed := range o.Seeds {
				sc, err := tr.gen(ScenarioOptions{Seed: seed, Nodes: o.Nodes, Pods: o.Pods, Waves: o.Waves,
					PodScale: lv.PodScale, BaseShift: lv.BaseShift, Shape: shape})
				if err != nil {
					return err
				}
				tr.t.Scenarios[fmt.Sprintf("%s/%d", level, seed)] = sc
				for _, rc := range o.Runs {
					if err := tr.one(ctx, sc, level, rc); err != nil {
						return err
					}
				}
			}
		}
	}
	if o.Burst <= 0 {
		return nil
	}
	sc, err := tr.gen(ScenarioOptions{Seed: o.Seeds[0], Nodes: o.Nodes, Pods: o.Burst, Waves: 1, Burst: o.Burst})
	if err != nil {
		return err
	}
	tr.t.Burst = sc
	for _, rc := range o.Runs {
		if err := tr.one(ctx, sc, BurstLevel, rc); err != nil {
			return err
		}
	}
	return nil
}

// LevelName is a table cell's level: the level and the scenario's shape.
func LevelName(lv Level, shape string) string {
	switch shape {
	case ShapeWorkloads:
		return lv.Name + " wl"
	case ShapeGrowth:
		return lv.Name + " grow"
	}
	return lv.Name + " bare"
}

// spread is a figure over seeds: mean, min and max.
type spread struct{ mean, lo, hi float64 }

func spreadOf(vals []float64) spread {
	if len(vals) == 0 {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	s := spread{lo: math.Inf(1), hi: math.Inf(-1)}
	for _, v := range vals {
		s.mean += v
		s.lo, s.hi = min(s.lo, v), max(s.hi, v)
	}
	s.mean /= float64(len(vals))
	return s
}

func (s spread) format(f string) string {
	if s.lo == s.hi {
		return fmt.Sprintf(f, s.mean)
	}
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", s.mean, s.lo, s.hi)
}

// Row is one (level, run) of the table over its seeds.
type Row struct {
	Level, Key, Name string
	Runs             []*RunResult
}

// Rows groups the runs by level and run, in the order they ran.
func (t *Table) Rows() []Row {
	var rows []Row
	idx := map[string]int{}
	for _, r := range t.Runs {
		k := r.Level + "\x00" + r.Key
		i, ok := idx[k]
		if !ok {
			i = len(rows)
			idx[k] = i
			rows = append(rows, Row{Level: r.Level, Key: r.Key, Name: r.Name})
		}
		rows[i].Runs = append(rows[i].Runs, r)
	}
	return rows
}

// Figures of a row, each over its seeds.
func (row Row) figure(nodes int, f func(r *RunResult) float64) spread {
	vals := make([]float64, 0, len(row.Runs))
	for _, r := range row.Runs {
		vals = append(vals, f(r))
	}
	return spreadOf(vals)
}

// NearShare is the row's share (percent) of nodes within ±10 of target, over its seeds.
func (row Row) NearShare(target float64, nodes int) spread {
	return row.figure(nodes, func(r *RunResult) float64 { return 100 * r.NearShare(target, nodes) })
}

// Freed is the row's share (percent) of nodes holding no benchmark pod, over its seeds.
func (row Row) Freed(nodes int) spread {
	return row.figure(nodes, func(r *RunResult) float64 { return 100 * float64(nodes-r.NodesWithPods) / float64(nodes) })
}

// PrintTable writes the realistic table, one row per level and run, each figure as the mean
// over seeds with [min–max], then the scenarios' sizes and the runs' notes.
func (t *Table) PrintTable(w io.Writer) {
	o := t.Options
	fmt.Fprintf(w, "Placement on simulated real load, realistic timeline: %d nodes, seeds %v, time scale 1/%.0f "+
		"(agent windows %s; a wave every %s = %s of a real cluster; sample %s, report %s, scheduler refresh %ds); "+
		"each node's windows start full of its base load. %s wall time.\n",
		o.Nodes, o.Seeds, 1/o.TimeScale, strings.Trim(fmt.Sprint(o.windows()), "[]"), o.WavePause,
		time.Duration(float64(o.WavePause)/o.TimeScale).Round(time.Second), o.SampleInterval, o.ReportInterval, o.RefreshSeconds,
		t.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "Figures are the mean over seeds [min–max]. ref = max(target %.0f %%, the nodes' mean CPU); overshoot = hottest node − ref, "+
		"largest over the run (\"max over\") and at the end (\"end over\"); \"node-min >ref+20\" in real-cluster minutes; "+
		"freed = nodes with no benchmark pod; pred err = median |predicted − measured| node CPU of the chosen node, %s after placement "+
		"(pods of workloads / bare pods / pods the record says were estimated from their workload's profile); gap = max over / freed / ±10 share minus its oracle's, same seed (pack runs: the packing oracle; others: the balancing one).\n\n",
		o.Target, o.predictionWindow())
	t.printRows(w)
	t.printScenarios(w)
	t.printNotes(w)
}

func (t *Table) printRows(w io.Writer) {
	o := t.Options
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "level\trun\t±10 of %.0f%%\tfreed\tmax over\tend over\tnode-min >ref+20\t>%d%% nodes\tutil mean\tutil std\tunplaced\tpred err wl / bare / prof\tgap to oracle\t\n", o.Target, HotPercent)
	for _, row := range t.Rows() {
		n := o.Nodes
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", row.Level, row.Name,
			row.NearShare(o.Target, n).format("%.0f"), row.Freed(n).format("%.0f"),
			row.figure(n, func(r *RunResult) float64 { return r.MaxOvershoot }).format("%.1f"),
			row.figure(n, func(r *RunResult) float64 { return r.EndOvershoot }).format("%.1f"),
			row.figure(n, func(r *RunResult) float64 { return r.MinutesOver20 }).format("%.1f"),
			row.figure(n, func(r *RunResult) float64 { return float64(r.HotNodes) }).format("%.0f"),
			row.figure(n, func(r *RunResult) float64 { m, _ := r.MeanStd(); return m }).format("%.1f"),
			row.figure(n, func(r *RunResult) float64 { _, s := r.MeanStd(); return s }).format("%.1f"),
			row.figure(n, func(r *RunResult) float64 { return float64(r.Unplaced) }).format("%.0f"),
			row.predErr(), t.gap(row))
	}
	tw.Flush()
}

// predErr is the row's median prediction errors (mean over seeds), "–" where no pod had one.
func (row Row) predErr() string {
	f := func(get func(r *RunResult) PredStat) string {
		var vals []float64
		for _, r := range row.Runs {
			if st := get(r); st.N > 0 {
				vals = append(vals, st.MedianAbs)
			}
		}
		if len(vals) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f", spreadOf(vals).mean)
	}
	return f(func(r *RunResult) PredStat { return r.PredWorkload }) + " / " + f(func(r *RunResult) PredStat { return r.PredBare }) +
		" / " + f(func(r *RunResult) PredStat { return r.PredProfiled })
}

// gap is the row's distance to its oracle (oracleFor) in the same level and seed: max over,
// freed and near-target share, each the mean over seeds of run − oracle; "–" without one.
func (t *Table) gap(row Row) string {
	key := oracleFor(row.Key)
	if key == "" {
		return "–"
	}
	n := t.Options.Nodes
	var over, freed, near []float64
	for _, r := range row.Runs {
		for _, q := range t.Runs {
			if q.Key != key || q.Level != r.Level || q.Seed != r.Seed {
				continue
			}
			over = append(over, r.MaxOvershoot-q.MaxOvershoot)
			freed = append(freed, 100*float64(q.NodesWithPods-r.NodesWithPods)/float64(n))
			near = append(near, 100*(r.NearShare(t.Options.Target, n)-q.NearShare(t.Options.Target, n)))
		}
	}
	if len(over) == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.1f / %+.0f / %+.0f", spreadOf(over).mean, spreadOf(freed).mean, spreadOf(near).mean)
}

func (t *Table) printScenarios(w io.Writer) {
	o := t.Options
	fmt.Fprintln(w, "\nScenarios (as generated):")
	for _, shape := range o.Shapes {
		for _, lv := range o.Levels {
			for _, seed := range o.Seeds {
				if sc := t.Scenarios[fmt.Sprintf("%s/%d", LevelName(lv, shape), seed)]; sc != nil {
					fmt.Fprintf(w, "  level %s seed %d: %s\n", LevelName(lv, shape), seed, scenarioLine(sc))
				}
			}
		}
	}
	if t.Burst != nil {
		fmt.Fprintf(w, "  burst: %d identical pods (%dm CPU / %dMi requested, %.0fm used) created at once: %s\n",
			len(t.Burst.Pods), BurstPod.ReqMilliCPU, BurstPod.ReqMemMiB, BurstPod.UseMilliCPU, scenarioLine(t.Burst))
	}
}

func (t *Table) printNotes(w io.Writer) {
	var notes []string
	for _, r := range t.Runs {
		for _, n := range r.Notes {
			if strings.HasPrefix(n, "at the end the served window average") {
				continue // one per run; the lag is not what this table is about
			}
			notes = append(notes, fmt.Sprintf("  %s seed %d %s: %s", r.Level, r.Seed, r.Name, n))
		}
		if r.FailedPolls > 0 || r.ServedVsSimulated > 3 {
			notes = append(notes, fmt.Sprintf("  %s seed %d %s: %d/%d watcher polls failed, served−simulated %.1f points",
				r.Level, r.Seed, r.Name, r.FailedPolls, r.Polls, r.ServedVsSimulated))
		}
		if n := predNote(r); n != "" {
			notes = append(notes, fmt.Sprintf("  %s seed %d %s: %s", r.Level, r.Seed, r.Name, n))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}

// predNote is a run's signed median prediction errors, per kind of pod that had any.
func predNote(r *RunResult) string {
	var parts []string
	for _, k := range []struct {
		name string
		st   PredStat
	}{{"workload pods", r.PredWorkload}, {"bare pods", r.PredBare}, {"pods estimated from a profile", r.PredProfiled},
		{"pods estimated from their namespace", r.PredNamespace}} {
		if k.st.N > 0 {
			parts = append(parts, fmt.Sprintf("%s %+.1f (%d pods)", k.name, k.st.MedianBias, k.st.N))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("prediction error, median signed (predicted − measured): %s; %d placed pods without one", strings.Join(parts, ", "), r.PredMissing)
}

func scenarioLine(sc *Scenario) string {
	t := sc.Totals()
	if len(sc.Workloads) > 0 {
		deploys := 0
		for _, w := range sc.Workloads {
			if w.Kind == KindDeployment {
				deploys++
			}
		}
		return fmt.Sprintf("%d workloads (%d Deployments, %d StatefulSets; %d replicas at the end) and %d bare pods (%d stay) in %d waves: %.0f %% of CPU requested, %.0f %% used at the end (base %.0f %%)",
			len(sc.Workloads), deploys, len(sc.Workloads)-deploys, sc.replicasAtEnd(), len(sc.Pods), countStay(sc), sc.Waves,
			100*float64(t.EndReqMilliCPU)/float64(t.MilliCPU), 100*(t.BaseMilliCPU+t.EndUseMilliCPU)/float64(t.MilliCPU), 100*t.BaseMilliCPU/float64(t.MilliCPU))
	}
	return fmt.Sprintf("%d pods in %d waves, %d stay: %.0f %% of CPU requested, %.0f %% used at the end (base %.0f %%)",
		len(sc.Pods), sc.Waves, countStay(sc), 100*float64(t.EndReqMilliCPU)/float64(t.MilliCPU),
		100*(t.BaseMilliCPU+t.EndUseMilliCPU)/float64(t.MilliCPU), 100*t.BaseMilliCPU/float64(t.MilliCPU))
}
