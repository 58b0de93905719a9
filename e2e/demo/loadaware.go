package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/decisionapi"
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
	sched, ec, err := startRecording(ctx, env, env.Cluster, schedulerName, stack.TLPConfig(schedulerName, st.Watcher.URL, target, 60, 1))
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
	if _, err := stack.WaitFresh(ctx, st.Watcher.URL, names, time.Minute); err != nil {
		return err
	}

	if err := framework.EnsureNamespace(ctx, env.Client, ns); err != nil {
		return err
	}
	// Seed 001's empty pod (a cpu limit of 0: TargetLoadPacking predicts 0 m), then a
	// Guaranteed 100m pod (it predicts the limit). Every number below is the running
	// scheduler's own, read back from its decision record: the utilisation it read from the
	// watcher, the utilisation it predicted with the pod, and the score.
	fmt.Fprintf(env.Out, "TargetLoadPacking, target %d %%, nodes of 8 CPU, utilisation from %s/watcher:\n", target, st.Watcher.URL)
	for _, pc := range []struct{ name, cpu string }{{"seed-001-empty-pod", "0"}, {"load-aware-pod", "100m"}} {
		spec := framework.PodSpec(schedulerName, pc.cpu, "64Mi")
		for i := range spec.Containers {
			spec.Containers[i].Resources.Limits = spec.Containers[i].Resources.Requests.DeepCopy()
		}
		spec.NodeSelector = map[string]string{label: "true"}
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, pc.name, map[string]string{"app": pc.name}, spec), createOpts); err != nil {
			return err
		}
		pods, err := framework.WaitPods(ctx, env.Client, ns, "app="+pc.name, 1, 90*time.Second, framework.Running)
		if err != nil {
			return err
		}
		rec, err := printDecision(ctx, env, ec, ns, pc.name, targetloadpacking.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Out, "pod %s/%s (cpu %s, scheduler %s) → %s\n", ns, pods[0].Name, pc.cpu, schedulerName, pods[0].Spec.NodeName)
		if pc.cpu == "0" {
			if err := checkSeed001(env.Out, rec, loads, target); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSeed001 holds the running scheduler's record of the seed's empty pod to seed 001: each
// node's TargetLoadPacking score is the upstream formula on the node's measured CPU (u ≤ t:
// (100−t)·u/t + t; else t·(100−u)/(100−t), rounded half up: 25 % → 78, 50 % → 33, 10 % → 55 at
// t = 40), and the pod went to the best-scored node.
func checkSeed001(out io.Writer, rec decisionapi.Record, loads []stack.NodeLoad, target float64) error {
	best, bestScore := "", int64(-1)
	for _, n := range loads {
		want := seed001Score(n.CPU, target)
		var got *decisionapi.NodeRecord
		for i := range rec.Nodes {
			if rec.Nodes[i].Node == n.Name {
				got = &rec.Nodes[i]
			}
		}
		if got == nil {
			return fmt.Errorf("seed 001: the decision record has no entry for %s", n.Name)
		}
		s, ok := got.Score(targetloadpacking.Name)
		if !ok || s.Raw != want {
			return fmt.Errorf("seed 001: %s at %.0f %% CPU scored %d by TargetLoadPacking (recorded: %v), the seed's formula gives %d", n.Name, n.CPU, s.Raw, ok, want)
		}
		if want > bestScore {
			best, bestScore = n.Name, want
		}
	}
	if rec.Chosen != best {
		return fmt.Errorf("seed 001: the pod went to %s, the seed's best-scored node is %s (%d)", rec.Chosen, best, bestScore)
	}
	fmt.Fprintf(out, "checked: seed 001's scores and node order (%s first)\n", best)
	return nil
}

// seed001Score is seed 001's TargetLoadPacking score of a node at u % CPU for target t %.
func seed001Score(u, t float64) int64 {
	var s float64
	if u <= t {
		s = (100-t)*u/t + t
	} else {
		s = t * (100 - u) / (100 - t)
	}
	return int64(math.Floor(s + 0.5))
}
