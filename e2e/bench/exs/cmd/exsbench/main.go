// Command exsbench prints the workload ExS (DaemonSet pods excluded) of a mixed workload placed by berth-scheduler
// with SySched and with the default plugins only (see package exs).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/berth-sched/berth/e2e/bench/exs"
)

func main() {
	nodes := flag.Int("nodes", 20, "simulated nodes")
	pods := flag.Int("pods", 200, "pods")
	profiles := flag.Int("profiles", 10, "synthetic seccomp profiles, used equally often")
	seed := flag.Int64("seed", 1, "seed of the profiles and the pod order")
	daemons := flag.Int("daemonsets", 2, "DaemonSets with a pod on every node (the first RuntimeDefault, the rest unconfined)")
	verbose := flag.Bool("v", false, "print progress")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := exs.Options{Nodes: *nodes, Pods: *pods, Profiles: *profiles, Seed: *seed, DaemonSets: *daemons}
	if *verbose {
		o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "exsbench: "+f+"\n", a...) }
	}
	res, err := exs.Execute(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "exsbench:", err)
		os.Exit(1)
	}
	res.Print(os.Stdout)
}
