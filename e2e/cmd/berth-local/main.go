// Command berth-local runs Berth on a local cluster built from source.
//
//	berth-local demo   start the cluster, run every scenario, print the placements, stop
//	berth-local up     start the cluster (a real node where possible) and leave it running
//	                   under a supervisor process (see local.go)
//	berth-local down   stop the cluster `up` started and leave nothing behind
//	berth-local add-nodes N [-cpu 8 -memory 32Gi -label k=v -taint k=v:NoSchedule ...]
//	                   add simulated (KWOK) nodes to the cluster `up` keeps running (addnodes.go)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/demo"
)

func main() {
	// The demo's controller-runtime clients log nothing worth a demo's output; without a
	// logger set, controller-runtime prints a warning and a stack trace after 30 s.
	ctrllog.SetLogger(logr.Discard())
	fs := flag.NewFlagSet("berth-local", flag.ExitOnError)
	dir := fs.String("dir", ".cache/local-cluster", "state directory of the cluster `up` keeps running")
	verbose := fs.Bool("v", false, "print progress")
	simulated := fs.Bool("simulated", false, "demo, up: simulated (KWOK) nodes only, even where a real node could run")
	only := fs.String("only", "", "demo: run only the scenarios whose name contains this")
	realNodes := fs.Int("real-nodes", defaultRealNodes(), "demo, up: how many real nodes to run where they can run (default $REAL_NODES, else 3)")
	autoscaler := fs.String("autoscaler", "", "up: run an autoscaler beside the cluster: karpenter (Karpenter's KWOK provider, with a NodePool for the chart's default isolation pool and a plain autoscaled pool), or none (empty)")
	if len(os.Args) < 2 {
		usage()
	}
	cmd := os.Args[1]
	if cmd == "add-nodes" {
		// Its own flags (capacity, labels, taints) and a count: parsed apart from the others.
		o, err := parseAddNodes(os.Args[2:], os.Stderr)
		if err != nil {
			if !errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(os.Stderr, "berth-local add-nodes: %v\n", err)
			}
			os.Exit(2)
		}
		if abs, err := filepath.Abs(o.dir); err == nil {
			o.dir = abs
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = addNodes(ctx, o, os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "berth-local add-nodes: %v\n", err)
			os.Exit(1)
		}
		return
	}
	_ = fs.Parse(os.Args[2:])
	if abs, err := filepath.Abs(*dir); err == nil {
		*dir = abs
	}
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "berth-local: "+format+"\n", args...) }
	}
	if err := checkAutoscaler(*autoscaler); err != nil {
		fmt.Fprintf(os.Stderr, "berth-local %s: %v\n", cmd, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd {
	case "demo":
		err = runDemo(ctx, !*simulated, *realNodes, *only, logf)
	case "up":
		err = up(ctx, localOpts{dir: *dir, simulated: *simulated, realNodes: *realNodes, autoscaler: *autoscaler})
	case "supervise":
		err = supervise(localOpts{dir: *dir, simulated: *simulated, realNodes: *realNodes, autoscaler: *autoscaler})
	case "down":
		err = down(localOpts{dir: *dir})
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "berth-local %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: berth-local demo|up|down [-dir DIR] [-simulated] [-real-nodes N] [-v]")
	fmt.Fprintln(os.Stderr, "       berth-local add-nodes N [-cpu 8] [-memory 32Gi] [-pods 110] [-label k=v]... [-taint k=v:NoSchedule]... [-dir DIR]")
	os.Exit(2)
}

// defaultRealNodes is $REAL_NODES (make up REAL_NODES=1), else 3.
func defaultRealNodes() int {
	if v := os.Getenv("REAL_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > cluster.MaxRealNodes {
			fmt.Fprintf(os.Stderr, "berth-local: REAL_NODES=%q: want a number from 1 to %d\n", v, cluster.MaxRealNodes)
			os.Exit(2)
		}
		return n
	}
	return 3
}

func runDemo(ctx context.Context, realNode bool, count int, only string, logf func(string, ...any)) error {
	start := time.Now()
	fmt.Println("Starting a local cluster built from source (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK) with berth-scheduler.")
	cfg := cluster.Config{Logf: logf}
	if realNode {
		cfg.RealNode = &cluster.RealNodeConfig{ClusterDNS: true, Count: count}
	}
	c, err := cluster.Start(ctx, cfg)
	if errors.Is(err, cluster.ErrRealNodeUnavailable) {
		// A real node needs root and containerd; the demo still shows everything else.
		fmt.Printf("No real node: %v\n", err)
		cfg.RealNode = nil
		c, err = cluster.Start(ctx, cfg)
	}
	if err != nil {
		return err
	}
	if rns := c.RealNodes(); len(rns) > 0 {
		fmt.Printf("Nodes: %d REAL nodes %s (containerd + kubelet + kube-proxy each, in network namespaces of their own, pods routed between them) and KWOK-simulated nodes.\n",
			len(rns), nodeNames(rns))
		fmt.Printf("Cluster up in %s; %s.\n", time.Since(start).Round(100*time.Millisecond), c.Footprint(os.Getpid()))
	} else {
		fmt.Println("Nodes: KWOK-simulated only (run as root with containerd installed, after `make images`, for a real node).")
	}
	defer func() {
		fmt.Println("Stopping the local cluster.")
		c.Stop()
	}()
	berth, err := c.StartBerthScheduler(ctx, cluster.BerthSchedulerOptions{})
	if err != nil {
		return err
	}
	env := &demo.Env{Cluster: c, Client: c.Client, Out: os.Stdout, BerthPort: berth.Port}
	if err := demo.Run(ctx, env, only); err != nil {
		return err
	}
	fmt.Printf("\nDemo finished in %s.\n", time.Since(start).Round(time.Second))
	return nil
}

func nodeNames(rns []*cluster.RealNode) string {
	var n []string
	for _, r := range rns {
		n = append(n, r.NodeName)
	}
	return strings.Join(n, ", ")
}
