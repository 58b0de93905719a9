package demo

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/suites/loadaware/stack"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/targetloadpacking"
)

func init() {
	register(20, Scenario{Name: "load-aware: TargetLoadPacking on measured CPU (seed 001: 25 %, 50 %, 10 %)", Run: loadAware})
}

// loadAware is seed 001's scenario: three 8-CPU workers at 25 %, 50 % and 10 % CPU as measured
// by berth-agent (fixture /proc), berth-loadwatcher collecting the agents' reports, and a second
// berth-scheduler whose profile scores with TargetLoadPacking (target 40 %) alone.
func loadAware(ctx context.Context, env *Env) error {
	const (
		ns            = "demo-loadaware"
		schedulerName = "berth-scheduler-loadaware"
		label         = "berth.io/demo-loadaware"
		target        = 40
		nodeMilliCPU  = 8000
	)
	loads := []stack.NodeLoad{
		{Name: "loadaware-worker-1", CPU: 25, Memory: 40},
		{Name: "loadaware-worker-2", CPU: 50, Memory: 40},
		{Name: "loadaware-worker-3", CPU: 10, Memory: 40},
	}
	for _, n := range loads {
		if err := env.Cluster.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: "8", Memory: "16Gi",
			Labels: map[string]string{label: "true"}}); err != nil {
			return err
		}
	}
	st, err := stack.Start(ctx, env.Cluster, stack.Options{Prefix: "demo-", Nodes: loads})
	if err != nil {
		return err
	}
	sched, err := env.Cluster.StartScheduler(ctx, cluster.SchedulerOptions{Name: schedulerName,
		Config: stack.TLPConfig(schedulerName, st.Watcher.URL, target, 60, 1)})
	if err != nil {
		return err
	}
	metrics, err := stack.SchedulerMetrics(ctx, env.Cluster, sched.Port)
	if err != nil {
		return err
	}
	if err := stack.WaitFetched(ctx, metrics, targetloadpacking.Name, time.Minute); err != nil {
		return fmt.Errorf("%s never read the load watcher: %w", schedulerName, err)
	}
	names := make([]string, len(loads))
	for i, n := range loads {
		names[i] = n.Name
	}
	r, err := stack.WaitFresh(ctx, st.Watcher.URL, names, time.Minute)
	if err != nil {
		return err
	}

	// A Guaranteed 100m pod: TargetLoadPacking predicts its limit. The seed's table assumes an
	// empty pod; both columns come from the plugin's own exported functions.
	podCPU := resource.MustParse("100m")
	fmt.Fprintf(env.Out, "TargetLoadPacking, target %d %%, nodes of 8 CPU, utilisation from %s/watcher:\n", target, st.Watcher.URL)
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCPU %\tSCORE (empty pod)\tSCORE (100m pod)")
	for _, n := range names {
		cpu, _ := stack.CPU(r, n)
		empty := targetloadpacking.ScoreForUtilization(target, targetloadpacking.PredictedUtilization(cpu, nodeMilliCPU, 0))
		withPod := targetloadpacking.ScoreForUtilization(target, targetloadpacking.PredictedUtilization(cpu, nodeMilliCPU, podCPU.MilliValue()))
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\n", n, cpu, empty, withPod)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if err := framework.EnsureNamespace(ctx, env.Client, ns); err != nil {
		return err
	}
	spec := framework.PodSpec(schedulerName, podCPU.String(), "64Mi")
	for i := range spec.Containers {
		spec.Containers[i].Resources.Limits = spec.Containers[i].Resources.Requests.DeepCopy()
	}
	spec.NodeSelector = map[string]string{label: "true"}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, "load-aware-pod", map[string]string{"app": "load-aware-pod"}, spec), createOpts); err != nil {
		return err
	}
	pods, err := framework.WaitPods(ctx, env.Client, ns, "app=load-aware-pod", 1, 90*time.Second, framework.Running)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "pod %s/%s (scheduler %s) → %s\n", ns, pods[0].Name, schedulerName, pods[0].Spec.NodeName)
	return nil
}
