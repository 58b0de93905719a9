// Command imagesharebench prints the share of pods placed on a node that already holds their
// image, stock kube-scheduler vs berth-scheduler with NodeImageLocality (see package imageshare).
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

	"github.com/berth-sched/berth/e2e/bench/imageshare"
)

func main() {
	nodes := flag.Int("nodes", 20, "nodes")
	images := flag.Int("images", 10, "catalogue images")
	pods := flag.Int("pods", 500, "pods per run")
	seed := flag.Int64("seed", 1, "inventory and workload seed")
	weights := flag.String("weights", "1,10", "NodeImageLocality weights to measure")
	verbose := flag.Bool("v", false, "print progress")
	flag.Parse()
	var ws []int
	for _, s := range strings.Split(*weights, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || w < 1 || w > 100 {
			fmt.Fprintf(os.Stderr, "imagesharebench: -weights: %q is not a weight 1..100\n", s)
			os.Exit(2)
		}
		ws = append(ws, w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := imageshare.Options{Nodes: *nodes, Images: *images, Pods: *pods, Seed: *seed, Profiles: imageshare.DefaultProfiles(ws...)}
	if *verbose {
		o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "imagesharebench: "+f+"\n", a...) }
	}
	res, err := imageshare.Execute(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagesharebench:", err)
		os.Exit(1)
	}
	res.Print(os.Stdout)
}
