// Command placementbench prints placement quality on simulated real load for the default
// scheduler and berth-scheduler's load-aware configurations, replayed on one seeded workload
// (see package placement).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sched/berth/e2e/bench/placement"
)

func main() {
	var o placement.Options
	flag.IntVar(&o.Scenario.Nodes, "nodes", 50, "simulated nodes")
	flag.IntVar(&o.Scenario.Pods, "pods", 600, "pods over the whole run")
	flag.IntVar(&o.Scenario.Waves, "waves", 10, "arrival waves")
	flag.Uint64Var(&o.Scenario.Seed, "seed", 1, "workload seed (same seed, same nodes, pods, uses and waves)")
	flag.Float64Var(&o.Scenario.PodScale, "pod-scale", 1, "multiplies every pod's requests and use (large values make pods bigger than any node)")
	flag.DurationVar(&o.WavePause, "wave-pause", 5*time.Second, "pause between waves (must exceed the report interval plus the scheduler refresh)")
	flag.DurationVar(&o.Settle, "settle", 8*time.Second, "wait after the last wave before the end figures")
	flag.IntVar(&o.KillWatcherAtWave, "kill-watcher-at-wave", 0, "failure drill: stop the load watcher at the start of this wave (1-based) of every run; 0: never")
	runs := flag.String("runs", strings.Join(placement.DefaultRuns, ","), "comma-separated runs: default, tlp40, tlp60, lvrb, both-filter, tlp40-lvrb, tlp40-nds, tlp60-nds, tlp40-w5, both-filter-nds, and chart (what charts/berth/values.yaml ships)")
	dir := flag.String("dir", "", "keep the cluster's state and logs here (default: a temporary directory, removed)")
	verbose := flag.Bool("v", false, "print progress")
	flag.Parse()
	rcs, err := placement.Runs(strings.Split(*runs, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "placementbench:", err)
		os.Exit(2)
	}
	o.Runs, o.Dir = rcs, *dir
	if *verbose {
		o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "placementbench: "+f+"\n", a...) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := placement.Execute(ctx, o)
	if res != nil && len(res.Runs) > 0 {
		res.Print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "placementbench:", err)
		os.Exit(1)
	}
}
