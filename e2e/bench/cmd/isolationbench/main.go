// Command isolationbench prints the scheduling throughput of instance-class isolation: the
// stock kube-scheduler enforcing IPP's anti-affinity term cluster-wide, berth-scheduler with
// InstanceIsolation (pods with the class label only), berth-scheduler's isolated profile (label
// and term, InterPodAffinity off) and berth-scheduler on the same pods without a class.
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
	nodes := flag.Int("nodes", 1000, "simulated nodes")
	pods := flag.Int("pods", 2000, "pods per run")
	classes := flag.Int("classes", 50, "instance classes (pod i has class i mod classes)")
	rounds := flag.Int("rounds", 2, "runs per profile; profiles alternate")
	verbose := flag.Bool("v", false, "print progress")
	only := flag.String("profiles", "", "comma-separated substrings of profile names to run (default: all)")
	allNodes := flag.Bool("all-nodes", false, "percentageOfNodesToScore 100 in every profile (no node sampling)")
	dir := flag.String("dir", "", "keep the cluster's state and logs here (default: a temporary directory, removed)")
	profileDir := flag.String("pprof", "", "save CPU and block profiles of every scheduler run in this directory")
	compare := flag.String("compare", "", "a second berth-scheduler binary in bin/: every berth-scheduler profile also runs on it, paired by round (as schedbench -compare)")
	compareOnly := flag.String("compare-only", "", "comma-separated substrings of the profile names -compare twins (default: all)")
	flag.Parse()
	if *classes < 1 || *nodes < 1 || *pods < 2 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "isolationbench: -classes, -nodes and -rounds must be ≥ 1 and -pods ≥ 2")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	profiles, err := bench.IsolationProfiles(*classes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "isolationbench:", err)
		os.Exit(1)
	}
	if *only != "" {
		var keep []bench.Profile
		for _, p := range profiles {
			for _, want := range strings.Split(*only, ",") {
				if want != "" && strings.Contains(p.Name, want) {
					keep = append(keep, p)
					break
				}
			}
		}
		profiles = keep
	}
	if *allNodes {
		for i := range profiles {
			// why: a profile entry is a YAML list item; a key at its indentation extends it.
			profiles[i].Profiles += "  percentageOfNodesToScore: 100\n"
			profiles[i].Name += ", all nodes"
		}
	}
	o := bench.Options{Dir: *dir, Nodes: *nodes, Pods: *pods, Rounds: *rounds, Profiles: bench.WithTwins(profiles, *compare, *compareOnly), ProfileDir: *profileDir}
	if *verbose {
		o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "isolationbench: "+f+"\n", a...) }
	}
	res, err := bench.Execute(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "isolationbench:", err)
		os.Exit(1)
	}
	fmt.Printf("%d instance classes (pod i: class i mod %d)\n", *classes, *classes)
	res.Print(os.Stdout)
	res.PrintIsolationRatios(os.Stdout)
	if *compare != "" {
		res.PrintTwins(os.Stdout, *compare)
	}
}
