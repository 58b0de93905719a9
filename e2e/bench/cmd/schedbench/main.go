// Command schedbench prints scheduling throughput of berth-scheduler and the stock
// kube-scheduler, measured side by side on one local cluster (see package bench).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/berth-sched/berth/e2e/bench"
)

func main() {
	nodes := flag.Int("nodes", 500, "simulated nodes")
	pods := flag.Int("pods", 2000, "pods per run")
	rounds := flag.Int("rounds", 3, "runs per profile; profiles alternate")
	verbose := flag.Bool("v", false, "print progress")
	dir := flag.String("dir", "", "keep the cluster's state and logs here (default: a temporary directory, removed)")
	profileDir := flag.String("pprof", "", "save CPU and block profiles of every scheduler run in this directory (go tool pprof merges a run's slices)")
	only := flag.String("profiles", "", "comma-separated substrings of profile names to run (default: all)")
	compare := flag.String("compare", "", "a second berth-scheduler binary in bin/ (e.g. one built from an older commit): "+
		"every selected berth-scheduler profile also runs on it, right after the original in each round, named \"… [BINARY]\"")
	compareOnly := flag.String("compare-only", "", "comma-separated substrings of the profile names -compare twins (default: all)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := bench.Options{Dir: *dir, Nodes: *nodes, Pods: *pods, Rounds: *rounds,
		Profiles: bench.WithTwins(selectProfiles(bench.AllProfiles(), *only), *compare, *compareOnly), ProfileDir: *profileDir}
	if *verbose {
		o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "schedbench: "+f+"\n", a...) }
	}
	res, err := bench.Execute(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
	res.Print(os.Stdout)
	if *compare != "" {
		res.PrintTwins(os.Stdout, *compare)
	}
}

func selectProfiles(all []bench.Profile, only string) []bench.Profile {
	if only == "" {
		return all
	}
	var out []bench.Profile
	for _, p := range all {
		for _, want := range strings.Split(only, ",") {
			if want != "" && strings.Contains(p.Name, want) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
