// Command schedbench prints scheduling throughput of berth-scheduler and the stock
// kube-scheduler, measured side by side on one local cluster (see package bench).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/berth-sched/berth/e2e/bench"
)

func main() {
	nodes := flag.Int("nodes", 500, "simulated nodes")
	pods := flag.Int("pods", 2000, "pods per run")
	rounds := flag.Int("rounds", 3, "runs per profile; profiles alternate")
	verbose := flag.Bool("v", false, "print progress")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := bench.Options{Nodes: *nodes, Pods: *pods, Rounds: *rounds,
		Profiles: []bench.Profile{bench.StockProfile(), bench.BerthDefaultProfile()}}
	if *verbose {
		o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "schedbench: "+f+"\n", a...) }
	}
	res, err := bench.Execute(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
	res.Print(os.Stdout)
}
