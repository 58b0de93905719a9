// Command scalebench prints berth-scheduler's throughput, CPU and peak memory at scale with the
// full Berth profile against the default plugins on the same cluster, the load-aware plugins
// fed by the real berth-loadwatcher serving every node, and checks every pod was bound exactly
// once (see bench.ExecuteScale). It exits non-zero if any pod was lost or bound twice.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-sched/berth/e2e/bench"
)

func main() {
	nodes := flag.Int("nodes", 5000, "simulated nodes")
	pods := flag.Int("pods", 10000, "pods per run")
	rounds := flag.Int("rounds", 1, "runs per profile; profiles alternate")
	kwok := flag.Bool("kwok", false, "let KWOK manage nodes and pods (heartbeats, Running status); default bare API objects as in schedbench")
	every := flag.Duration("report-every", time.Minute, "how often every node's load report is pushed again")
	dir := flag.String("dir", "", "keep the cluster's state and logs here (default: a temporary directory, removed)")
	profileDir := flag.String("pprof", "", "save CPU and block profiles of every scheduler run in this directory")
	verbose := flag.Bool("v", false, "print progress")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := bench.ScaleOptions{Nodes: *nodes, Pods: *pods, Rounds: *rounds, KWOK: *kwok, ReportEvery: *every, Dir: *dir, ProfileDir: *profileDir}
	if *verbose {
		o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "scalebench: "+f+"\n", a...) }
	}
	start := time.Now()
	res, err := bench.ExecuteScale(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
	res.Print(os.Stdout)
	fmt.Printf("\nwall time %s\n", time.Since(start).Round(time.Second))
	if err := res.ExactlyOnce(); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}
