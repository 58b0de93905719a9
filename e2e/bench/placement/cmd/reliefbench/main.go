// Command reliefbench runs bench-placement's load-shift phase: hot-spot relief off, dry-run and
// on, replayed on one seeded workload (see placement/relief.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-sched/berth/e2e/bench/placement"
)

func main() {
	var o placement.ReliefOptions
	flag.Uint64Var(&o.Seed, "seed", 1, "workload seed (same seed: same workloads, same shift)")
	flag.IntVar(&o.Nodes, "nodes", 16, "simulated 4-CPU nodes (one berth-agent process each)")
	flag.IntVar(&o.Workloads, "workloads", 40, "single-replica ReplicaSets of 1 CPU")
	flag.IntVar(&o.Cold, "cold", 6, "nodes cordoned while the workloads are placed (capacity that arrives later)")
	flag.Float64Var(&o.Shift, "shift", 0.25, "share of workloads whose use rises to 100-150 % of the request after placement")
	flag.DurationVar(&o.Interval, "interval", 5*time.Second, "rebalancer round (a real cluster's 60 s, compressed)")
	flag.DurationVar(&o.Observe, "observe", time.Minute, "how long each window (off, dry-run, on) is measured from the load shift")
	dir := flag.String("dir", "", "keep the cluster's state and logs here (default: a temporary directory, removed)")
	verbose := flag.Bool("v", false, "print progress")
	flag.Parse()
	o.Dir = *dir
	if *verbose {
		o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "reliefbench: "+f+"\n", a...) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := placement.ExecuteRelief(ctx, o)
	if res != nil {
		res.Print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliefbench:", err)
		os.Exit(1)
	}
}
