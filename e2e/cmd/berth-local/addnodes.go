package main

// `berth-local add-nodes N` adds N simulated (KWOK) nodes to the cluster `make up` keeps
// running: Node objects the cluster's KWOK manages (it marks them Ready and keeps their
// leases), with the given capacity, labels and taints. On a cluster with real nodes they carry
// KWOK's NoSchedule taint like every simulated node of the harness (nothing that does not
// tolerate it lands where nothing runs); on a `-simulated` cluster they do not, like up's own.
// Remove one with `kubectl delete node NAME`; `make down` removes them all with the cluster.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-sched/berth/e2e/cluster"
)

// maxAddNodes bounds one add-nodes call (KWOK simulates thousands, but a typo of 10000 for
// 10 should not fill the API server).
const maxAddNodes = 1000

type addNodesOpts struct {
	dir    string
	count  int
	prefix string
	spec   cluster.NodeSpec // Name unset; the template of every node
	// timeout for every node to become Ready.
	timeout time.Duration
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// parseAddNodes reads `add-nodes N [flags]` (N before or after the flags). Every refusal names
// the flag and the value.
func parseAddNodes(args []string, stderr io.Writer) (addNodesOpts, error) {
	fs := flag.NewFlagSet("berth-local add-nodes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := addNodesOpts{}
	fs.StringVar(&o.dir, "dir", ".cache/local-cluster", "state directory of the cluster `up` keeps running")
	fs.StringVar(&o.prefix, "prefix", "kwok-node", "node names are PREFIX-1, PREFIX-2, ... (names already taken are skipped)")
	cpu := fs.String("cpu", "8", "CPU capacity of each node")
	mem := fs.String("memory", "32Gi", "memory capacity of each node")
	pods := fs.Int("pods", 110, "pod capacity of each node")
	var labels, taints listFlag
	fs.Var(&labels, "label", "a label key=value of every node (repeatable)")
	fs.Var(&taints, "taint", "a taint key[=value]:Effect of every node, besides KWOK's own on a cluster with real nodes (repeatable)")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for the nodes to be Ready")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: berth-local add-nodes N [-cpu 8] [-memory 32Gi] [-pods 110] [-label k=v]... [-taint k=v:NoSchedule]... [-prefix kwok-node] [-dir DIR]")
		fs.PrintDefaults()
	}
	var count string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		count, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if count == "" && fs.NArg() > 0 {
		count = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if count == "" {
		fs.Usage()
		return o, errors.New("how many nodes? give N (e.g. add-nodes 3)")
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > maxAddNodes {
		return o, fmt.Errorf("N=%q: want a number from 1 to %d", count, maxAddNodes)
	}
	o.count = n
	if errs := validation.IsDNS1123Subdomain(o.prefix + "-1"); len(errs) > 0 {
		return o, fmt.Errorf("-prefix %q: node names must be DNS subdomains: %s", o.prefix, strings.Join(errs, "; "))
	}
	for name, q := range map[string]string{"-cpu": *cpu, "-memory": *mem} {
		v, err := resource.ParseQuantity(q)
		if err != nil || v.Sign() <= 0 {
			return o, fmt.Errorf("%s %q: want a positive quantity such as 8, 500m, 32Gi", name, q)
		}
	}
	if *pods < 1 {
		return o, fmt.Errorf("-pods %d: want at least 1", *pods)
	}
	o.spec = cluster.NodeSpec{CPU: *cpu, Memory: *mem, Pods: *pods, Labels: map[string]string{}}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return o, fmt.Errorf("-label %q: want key=value", l)
		}
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			return o, fmt.Errorf("-label %q: %s", l, strings.Join(errs, "; "))
		}
		o.spec.Labels[k] = v
	}
	for _, s := range taints {
		t, err := cluster.ParseTaint(s)
		if err != nil {
			return o, fmt.Errorf("-taint: %w", err)
		}
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return o, fmt.Errorf("-taint %q: key: %s", s, strings.Join(errs, "; "))
		}
		o.spec.Taints = append(o.spec.Taints, t)
	}
	return o, nil
}

// addNodes adds o.count simulated nodes to the cluster running in o.dir and prints their names.
func addNodes(ctx context.Context, o addNodesOpts, stdout io.Writer) error {
	lock, held, err := lockState(o.dir)
	if err != nil {
		return fmt.Errorf("no local cluster running in %s (%v): start one with `make up`", o.dir, err)
	}
	if held {
		lock.Close()
		return fmt.Errorf("no local cluster running in %s: start one with `make up`", o.dir)
	}
	return joinNodes(ctx, filepath.Join(clusterDir(o.dir), "admin.kubeconfig"), o, stdout)
}

// joinNodes is addNodes on the cluster behind kubeconfig (tests run it on a cluster of their own).
func joinNodes(ctx context.Context, kubeconfig string, o addNodesOpts, stdout io.Writer) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var existing []string
	for _, n := range list.Items {
		existing = append(existing, n.Name)
	}
	simulatedOnly, _ := cluster.OnlySimulated(list.Items)
	var specs []cluster.NodeSpec
	for _, name := range cluster.NextNodeNames(existing, o.prefix, o.count) {
		s := o.spec
		s.Name = name
		// why: beside real nodes a simulated node must carry KWOK's taint, or the chart's
		// components could be placed where nothing runs; alone, up's own carry none.
		s.WithoutSimulatedTaint = simulatedOnly
		s.Taints = append([]corev1.Taint(nil), o.spec.Taints...)
		specs = append(specs, s)
	}
	if err := cluster.JoinSimulatedNodes(ctx, cs, specs, o.timeout); err != nil {
		return err
	}
	taint := "with KWOK's taint " + cluster.SimulatedTaint.ToString() + " (tolerate it to place pods there)"
	if simulatedOnly {
		taint = "without KWOK's taint (the cluster has only simulated nodes)"
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	fmt.Fprintf(stdout, "added %d simulated nodes (cpu %s, memory %s, pods %d), Ready, %s: %s\n",
		len(specs), o.spec.CPU, o.spec.Memory, o.spec.Pods, taint, strings.Join(names, " "))
	fmt.Fprintf(stdout, "remove one with: kubectl delete node NAME (make down removes them all)\n")
	return nil
}
