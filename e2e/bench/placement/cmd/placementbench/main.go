// Command placementbench prints placement quality on simulated real load for the default
// scheduler and berth-scheduler's load-aware configurations (see package placement): by default
// the realistic table (load levels × seeds × runs, then a burst, on a timeline scaled so the
// agents' windows against the arrivals are a real cluster's), or with -single one seeded workload
// on the compressed timeline of the first version.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sched/berth/e2e/bench/placement"
)

// flags are the command line.
type flags struct {
	o                                       placement.Options
	single, quick, verbose                  *bool
	nodes, pods, waves, burst               *int
	seeds, levels, shapes, runs, dir, plots *string
	scale                                   *float64
	realWave                                *time.Duration
}

func parseFlags() *flags {
	f := &flags{}
	o := &f.o
	f.single = flag.Bool("single", false, "one seeded workload (-seed, -pod-scale) on the compressed timeline, not the realistic table")
	f.quick = flag.Bool("quick", false, "table: one seed, 30 nodes and 360 pods, a 100-pod burst (a few minutes)")
	f.nodes = flag.Int("nodes", 50, "simulated nodes")
	f.pods = flag.Int("pods", 600, "pods over the whole run (per level and seed)")
	f.waves = flag.Int("waves", 0, "arrival waves (0: 8 in the table, 10 with -single)")
	f.seeds = flag.String("seeds", "1,2,3", "table: comma-separated workload seeds")
	f.levels = flag.String("levels", "", "table: comma-separated levels by name (25, 40, 60; default all)")
	f.shapes = flag.String("shapes", placement.ShapeWorkloads+","+placement.ShapeBare, "table: scenario shapes, each at every level: "+
		placement.ShapeWorkloads+" (Deployments and StatefulSets of 1-30 replicas, 20 % bare pods), "+
		placement.ShapeGrowth+" (the same workloads, running with a third of their replicas before they scale up), "+placement.ShapeBare+" (independent bare pods)")
	f.burst = flag.Int("burst", 200, "table: identical pods created at once after the levels (0: no burst)")
	f.scale = flag.Float64("time-scale", 1.0/15, "table: agent windows and the wave interval scaled by this (1/15: 15-minute windows last 60 s)")
	f.realWave = flag.Duration("real-wave", time.Minute, "table: the real-cluster interval between waves, scaled by -time-scale")
	f.plots = flag.String("plots", "", "table: write one PNG per level into this directory (nodes sorted by end utilisation, the target, the oracles)")
	flag.Uint64Var(&o.Scenario.Seed, "seed", 1, "-single: workload seed (same seed, same nodes, pods, uses and waves)")
	flag.Float64Var(&o.Scenario.PodScale, "pod-scale", 1, "-single: multiplies every pod's requests and use (large values make pods bigger than any node)")
	flag.DurationVar(&o.WavePause, "wave-pause", 0, "-single: pause between waves (must exceed the report interval plus the scheduler refresh; default 5s)")
	flag.Float64Var(&o.Target, "target", placement.DefaultTarget, "the utilisation the near-target share and overshoot are measured against (default: the chart's targetUtilization)")
	flag.DurationVar(&o.Settle, "settle", 8*time.Second, "wait after the last wave before the end figures")
	flag.IntVar(&o.KillWatcherAtWave, "kill-watcher-at-wave", 0, "failure drill: stop the load watcher at the start of this wave (1-based) of every run; 0: never")
	f.runs = flag.String("runs", "", "comma-separated runs (default: "+strings.Join(placement.TableRuns, ",")+" for the table, "+strings.Join(placement.DefaultRuns, ",")+
		" with -single): "+strings.Join(placement.RunKeys(), ", ")+" (chart: what charts/berth/values.yaml ships)")
	f.dir = flag.String("dir", "", "keep the cluster's state and logs here (default: a temporary directory, removed)")
	f.verbose = flag.Bool("v", false, "print progress")
	flag.Parse()
	return f
}

func fail(code int, a ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"placementbench:"}, a...)...)
	os.Exit(code)
}

func main() {
	f := parseFlags()
	o := f.o
	keys := placement.TableRuns
	if *f.single {
		keys = placement.DefaultRuns
	}
	if *f.runs != "" {
		keys = strings.Split(*f.runs, ",")
	}
	rcs, err := placement.Runs(keys)
	if err != nil {
		fail(2, err)
	}
	o.Runs, o.Dir = rcs, *f.dir
	if *f.verbose {
		o.Logf = func(f string, a ...any) {
			fmt.Fprintf(os.Stderr, "placementbench %s: "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *f.single {
		runSingle(ctx, f, o)
		return
	}
	to := tableOptions(f, o)
	t, err := placement.ExecuteTable(ctx, to)
	if t != nil && len(t.Runs) > 0 {
		t.PrintTable(os.Stdout)
		if *f.plots != "" {
			files, perr := t.WritePlots(*f.plots)
			fmt.Fprintf(os.Stdout, "\nPlots: %s\n", strings.Join(files, ", "))
			if perr != nil {
				fmt.Fprintln(os.Stderr, "placementbench: plots:", perr)
			}
		}
	}
	if err != nil {
		fail(1, err)
	}
}

func runSingle(ctx context.Context, f *flags, o placement.Options) {
	o.Scenario.Nodes, o.Scenario.Pods, o.Scenario.Waves = *f.nodes, *f.pods, *f.waves
	if o.Scenario.Waves == 0 {
		o.Scenario.Waves = 10
	}
	res, err := placement.Execute(ctx, o)
	if res != nil && len(res.Runs) > 0 {
		res.Print(os.Stdout)
	}
	if err != nil {
		fail(1, err)
	}
}

// tableOptions are the table's options from the flags; bad values end the command.
func tableOptions(f *flags, o placement.Options) placement.TableOptions {
	to := placement.TableOptions{Options: o, Nodes: *f.nodes, Pods: *f.pods, Waves: *f.waves, Levels: placement.Levels, Burst: *f.burst}
	if to.Waves == 0 {
		to.Waves = 8
	}
	if *f.levels != "" {
		to.Levels = nil
		for _, name := range strings.Split(*f.levels, ",") {
			found := false
			for _, lv := range placement.Levels {
				if strings.TrimSuffix(lv.Name, " %") == strings.TrimSpace(name) {
					to.Levels, found = append(to.Levels, lv), true
				}
			}
			if !found {
				fail(2, fmt.Sprintf("-levels: unknown level %q (25, 40, 60)", name))
			}
		}
	}
	for _, s := range strings.Split(*f.shapes, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(placement.Shapes, s) {
			fail(2, fmt.Sprintf("-shapes: unknown shape %q (%s)", s, strings.Join(placement.Shapes, ", ")))
		}
		to.Shapes = append(to.Shapes, s)
	}
	for _, s := range strings.Split(*f.seeds, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			fail(2, "-seeds:", err)
		}
		to.Seeds = append(to.Seeds, v)
	}
	if *f.quick {
		to.Seeds, to.Nodes, to.Pods = to.Seeds[:1], 30, 360
		to.Burst = min(to.Burst, 100)
	}
	if !(*f.scale > 0 && *f.scale <= 1) {
		fail(2, "-time-scale must be in (0, 1]")
	}
	to.TimeScale = *f.scale
	to.WavePause = time.Duration(float64(*f.realWave) * *f.scale)
	return to
}
