// Package demo runs Berth's scenarios on the local cluster and prints where every pod went.
// Each capability adds a Scenario; `make demo` runs them all in order.
package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Env is what a scenario gets: the running cluster with berth-scheduler, and where to print.
type Env struct {
	Cluster *cluster.Cluster
	Client  kubernetes.Interface
	Out     io.Writer
	// BerthPort is the secure port of the demo's berth-scheduler (profile berth-scheduler,
	// decision records on by default); 0 when unknown.
	BerthPort int
	// Tamper, when set, rewrites the configuration of each scenario's own scheduler (by process
	// name) before it starts. Tests only: it proves a wrong outcome fails its scenario by name.
	Tamper func(scheduler, config string) string
}

// Run runs the scenarios whose name contains only (all when empty) in order, printing each
// one's heading, and stops at the first that fails, naming it.
func Run(ctx context.Context, env *Env, only string) error {
	for i, s := range Scenarios() {
		if !strings.Contains(s.Name, only) {
			continue
		}
		fmt.Fprintf(env.Out, "\n== %d. %s\n", i+1, s.Name)
		if err := s.Run(ctx, env); err != nil {
			return fmt.Errorf("scenario %q: %w", s.Name, err)
		}
	}
	return nil
}

// Scenario is one demonstration.
type Scenario struct {
	Name string
	Run  func(ctx context.Context, env *Env) error
}

var registered = map[int]Scenario{}

// register adds a scenario; each capability registers its own from an init function in its
// own file, with the order it runs in (opt-in is 10, then load-aware 20, SySched 30, ...).
func register(order int, s Scenario) {
	if _, dup := registered[order]; dup {
		panic(fmt.Sprintf("demo: two scenarios with order %d", order))
	}
	registered[order] = s
}

func init() {
	register(10, Scenario{Name: "opt-in: berth-scheduler beside the default scheduler", Run: optIn})
}

// Scenarios lists the demonstrations in the order `make demo` runs them.
func Scenarios() []Scenario {
	orders := make([]int, 0, len(registered))
	for o := range registered {
		orders = append(orders, o)
	}
	sort.Ints(orders)
	out := make([]Scenario, 0, len(orders))
	for _, o := range orders {
		out = append(out, registered[o])
	}
	return out
}

func optIn(ctx context.Context, env *Env) error {
	const ns = "demo-opt-in"
	if err := framework.EnsureNamespace(ctx, env.Client, ns); err != nil {
		return err
	}
	specs := []cluster.NodeSpec{
		{Name: "demo-node-1", CPU: "4", Memory: "16Gi"},
		{Name: "demo-node-2", CPU: "4", Memory: "16Gi"},
		{Name: "demo-node-3", CPU: "4", Memory: "16Gi"},
	}
	if err := env.Cluster.AddNodes(ctx, specs...); err != nil {
		return err
	}
	// One pod per node for each scheduler, the real nodes included when there are some.
	replicas := int32(len(specs))
	replicas += int32(len(env.Cluster.RealNodes()))
	for _, d := range []struct{ name, scheduler string }{{"with-berth", "berth-scheduler"}, {"with-default", ""}} {
		dep := framework.Deployment(ns, d.name, replicas, framework.PodSpec(d.scheduler, "100m", "64Mi"))
		if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, dep, createOpts); err != nil {
			return err
		}
	}
	pods, err := framework.WaitPods(ctx, env.Client, ns, "app in (with-berth,with-default)", 2*int(replicas), 90*time.Second, framework.Running)
	if err != nil {
		return err
	}
	// Events are written asynchronously after the binding.
	time.Sleep(time.Second)
	events, err := framework.SchedulingEvents(ctx, env.Client, ns)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tSCHEDULER\tNODE\tNODE KIND\tPHASE")
	for _, p := range pods {
		scheduler := "?"
		for _, e := range events[p.UID] {
			if e.Reason == "Scheduled" {
				scheduler = e.Scheduler
			}
		}
		kind := "simulated (KWOK)"
		if env.Cluster.RealNodeNamed(p.Spec.NodeName) != nil {
			kind = "real (containerd)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, scheduler, p.Spec.NodeName, kind, p.Status.Phase)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if env.BerthPort == 0 {
		return nil
	}
	// berth-scheduler's own account of one of its placements (upstream's default plugins).
	ec, err := framework.NewExplainClient(env.Cluster, env.BerthPort)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Spec.SchedulerName == "berth-scheduler" {
			fmt.Fprintln(env.Out)
			_, err := printDecision(ctx, env, ec, ns, p.Name, "NodeResourcesBalancedAllocation", "NodeResourcesFit", "PodTopologySpread", "TaintToleration")
			return err
		}
	}
	return nil
}

var createOpts = metav1.CreateOptions{}
