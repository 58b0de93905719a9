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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sched/berth/e2e/bench/placement"
)

func main() {
	var o placement.Options
	single := flag.Bool("single", false, "one seeded workload (-seed, -pod-scale) on the compressed timeline, not the realistic table")
	quick := flag.Bool("quick", false, "table: one seed, 30 nodes and 360 pods, a 100-pod burst (a few minutes)")
	nodes := flag.Int("nodes", 50, "simulated nodes")
	pods := flag.Int("pods", 600, "pods over the whole run (per level and seed)")
	waves := flag.Int("waves", 0, "arrival waves (0: 8 in the table, 10 with -single)")
	seeds := flag.String("seeds", "1,2,3", "table: comma-separated workload seeds")
	levels := flag.String("levels", "", "table: comma-separated levels by name (25, 40, 60; default all)")
	burst := flag.Int("burst", 200, "table: identical pods created at once after the levels (0: no burst)")
	scale := flag.Float64("time-scale", 1.0/15, "table: agent windows and the wave interval scaled by this (1/15: 15-minute windows last 60 s)")
	realWave := flag.Duration("real-wave", time.Minute, "table: the real-cluster interval between waves, scaled by -time-scale")
	flag.Uint64Var(&o.Scenario.Seed, "seed", 1, "-single: workload seed (same seed, same nodes, pods, uses and waves)")
	flag.Float64Var(&o.Scenario.PodScale, "pod-scale", 1, "-single: multiplies every pod's requests and use (large values make pods bigger than any node)")
	flag.DurationVar(&o.WavePause, "wave-pause", 0, "-single: pause between waves (must exceed the report interval plus the scheduler refresh; default 5s)")
	flag.Float64Var(&o.Target, "target", placement.DefaultTarget, "the utilisation the near-target share and overshoot are measured against (default: the chart's targetUtilization)")
	flag.DurationVar(&o.Settle, "settle", 8*time.Second, "wait after the last wave before the end figures")
	flag.IntVar(&o.KillWatcherAtWave, "kill-watcher-at-wave", 0, "failure drill: stop the load watcher at the start of this wave (1-based) of every run; 0: never")
	runs := flag.String("runs", "", "comma-separated runs (default: "+strings.Join(placement.TableRuns, ",")+" for the table, "+strings.Join(placement.DefaultRuns, ",")+
		" with -single): "+strings.Join(placement.RunKeys(), ", ")+" (chart: what charts/berth/values.yaml ships)")
	dir := flag.String("dir", "", "keep the cluster's state and logs here (default: a temporary directory, removed)")
	verbose := flag.Bool("v", false, "print progress")
	flag.Parse()
	keys := placement.TableRuns
	if *single {
		keys = placement.DefaultRuns
	}
	if *runs != "" {
		keys = strings.Split(*runs, ",")
	}
	rcs, err := placement.Runs(keys)
	if err != nil {
		fmt.Fprintln(os.Stderr, "placementbench:", err)
		os.Exit(2)
	}
	o.Runs, o.Dir = rcs, *dir
	if *verbose {
		o.Logf = func(f string, a ...any) {
			fmt.Fprintf(os.Stderr, "placementbench %s: "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *single {
		o.Scenario.Nodes, o.Scenario.Pods, o.Scenario.Waves = *nodes, *pods, *waves
		if o.Scenario.Waves == 0 {
			o.Scenario.Waves = 10
		}
		res, err := placement.Execute(ctx, o)
		if res != nil && len(res.Runs) > 0 {
			res.Print(os.Stdout)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "placementbench:", err)
			os.Exit(1)
		}
		return
	}
	to := placement.TableOptions{Options: o, Nodes: *nodes, Pods: *pods, Waves: *waves, Levels: placement.Levels, Burst: *burst}
	if to.Waves == 0 {
		to.Waves = 8
	}
	if *levels != "" {
		to.Levels = nil
		for _, name := range strings.Split(*levels, ",") {
			found := false
			for _, lv := range placement.Levels {
				if strings.TrimSuffix(lv.Name, " %") == strings.TrimSpace(name) {
					to.Levels, found = append(to.Levels, lv), true
				}
			}
			if !found {
				fmt.Fprintf(os.Stderr, "placementbench: -levels: unknown level %q (25, 40, 60)\n", name)
				os.Exit(2)
			}
		}
	}
	for _, s := range strings.Split(*seeds, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "placementbench: -seeds:", err)
			os.Exit(2)
		}
		to.Seeds = append(to.Seeds, v)
	}
	if *quick {
		to.Seeds, to.Nodes, to.Pods = to.Seeds[:1], 30, 360
		to.Burst = min(to.Burst, 100)
	}
	if !(*scale > 0 && *scale <= 1) {
		fmt.Fprintln(os.Stderr, "placementbench: -time-scale must be in (0, 1]")
		os.Exit(2)
	}
	to.TimeScale = *scale
	to.WavePause = time.Duration(float64(*realWave) * *scale)
	t, err := placement.ExecuteTable(ctx, to)
	if t != nil && len(t.Runs) > 0 {
		t.PrintTable(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "placementbench:", err)
		os.Exit(1)
	}
}
