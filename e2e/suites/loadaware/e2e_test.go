package loadaware

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/targetloadpacking"
)

const (
	e2eScheduler   = "berth-loadaware-e2e"
	e2eTarget      = 40
	e2eExpirySecs  = 10
	e2eRefreshSecs = 1
	nodeMilliCPU   = 8000
	neutralScore   = 50 // the plugin's default neutralScore, which the profile keeps
)

// TestEndToEnd: three KWOK nodes of 8 CPU; one berth-agent process per node on a fixture /proc
// at 25 %, 50 % and 10 % CPU (seed 001); berth-loadwatcher (agent source) and berth-scheduler
// with a TargetLoadPacking profile (target 40 %), all as processes.
func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := shared
	loads := []stack.NodeLoad{{Name: "e2e-node-25", CPU: 25, Memory: 40}, {Name: "e2e-node-50", CPU: 50, Memory: 40}, {Name: "e2e-node-10", CPU: 10, Memory: 40}}
	for _, n := range loads {
		if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: "8", Memory: "16Gi", Pods: 110,
			Labels: map[string]string{"berth.io/e2e": "loadaware"}}); err != nil {
			t.Fatal(err)
		}
	}
	// stale-after (the watcher's own limit) is far above metricsExpirySeconds, so when a node
	// turns neutral below it is the plugin's expiry that did it, not the watcher.
	st, err := stack.Start(ctx, c, stack.Options{Prefix: "e2e-", Nodes: loads, WatcherArgs: []string{"--stale-after=5m"}})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-loadaware-e2e",
		Config: stack.TLPConfig(e2eScheduler, st.Watcher.URL, e2eTarget, e2eExpirySecs, e2eRefreshSecs)})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := stack.SchedulerMetrics(ctx, c, sched.Port)
	if err != nil {
		t.Fatal(err)
	}
	// Scheduling before the plugin's first fetch would give every node the neutral score:
	// wait until the scheduler itself says it has a snapshot.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return stack.Fetches(metrics(), "TargetLoadPacking", "success") > 0, nil
	}); err != nil {
		t.Fatalf("berth-scheduler never fetched the load watcher: %v\n%s", err, sched.Tail(20))
	}
	const ns = "loadaware-e2e"
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	names := []string{loads[0].Name, loads[1].Name, loads[2].Name}
	probeCPU := resource.MustParse("100m")

	t.Run("the real watcher serves Berth's typed form and the upstream document alike", func(t *testing.T) {
		if _, err := stack.WaitFresh(ctx, st.Watcher.URL, names, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := sameLoad(ctx, st.Watcher.URL, names); err != nil {
			t.Fatal(err)
		}
		// And the real scheduler reads that form, never falling back to the upstream one.
		page := metrics()
		if typed, upstream := documents(page, "TargetLoadPacking", "typed"), documents(page, "TargetLoadPacking", "upstream"); typed == 0 || upstream != 0 {
			t.Fatalf("berth-scheduler read %v typed and %v upstream documents, want only typed", typed, upstream)
		}
	})

	t.Run("a pod lands where the TargetLoadPacking formula says", func(t *testing.T) {
		r, err := stack.WaitFresh(ctx, st.Watcher.URL, names, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		scores := expectedScores(r, names, nil, probeCPU.MilliValue())
		want := argmax(scores)
		t.Logf("expected scores for a %s pod: %v", probeCPU.String(), scores)
		// Seed 001: 25 % → 77.5, 50 % → 33.3, 10 % → 55 for an empty pod: the 25 % node wins.
		if want != "e2e-node-25" {
			t.Fatalf("formula picks %s from /watcher %v; seed 001 says the 25 %% node", want, scores)
		}
		if got := schedule(ctx, t, c, ns, "probe-formula", probeCPU); got != want {
			t.Errorf("pod landed on %s, formula says %s (scores %v)", got, want, scores)
		}
	})

	t.Run("a burst of 20 pods does not all land on one node", func(t *testing.T) {
		for i := range 20 {
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, guaranteedPod(ns, fmt.Sprintf("burst-%02d", i), "burst", resource.MustParse("500m")), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pods, err := framework.WaitPods(ctx, c.Client, ns, "case=burst", 20, 2*time.Minute, framework.Running)
		if err != nil {
			t.Fatal(err)
		}
		per := map[string]int{}
		for _, p := range pods {
			per[p.Spec.NodeName]++
		}
		t.Logf("burst placement: %v", per)
		if len(per) < 2 {
			t.Errorf("all 20 pods on one node: %v (Reserve accounting should spread them)", per)
		}
		if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, deleteNow, metav1.ListOptions{LabelSelector: "case=burst"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("metrics older than metricsExpirySeconds score neutral", func(t *testing.T) {
		// Stop the agent of the node that wins; the watcher keeps serving its last sample
		// (stale-after 5m), so only the plugin's 10 s expiry can take the win away.
		victim := "e2e-node-25"
		c.StopComponent(st.Agents[victim].Process)
		var r *loadapi.Response
		// Deterministic: wait until the served sample is older than the expiry plus a refresh
		// and a second of rounding (sample times are whole seconds), instead of guessing.
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			if r, err = stack.GetWatcher(ctx, st.Watcher.URL); err != nil {
				return false, nil
			}
			ns, ok := r.Nodes[victim]
			return ok && time.Since(time.Unix(ns.Updated, 0)) > (e2eExpirySecs+e2eRefreshSecs+2)*time.Second, nil
		}); err != nil {
			t.Fatalf("sample of %s never aged: %v", victim, err)
		}
		if _, ok := stack.CPU(r, victim); !ok {
			t.Fatalf("the watcher dropped %s itself; this case is about the plugin's expiry", victim)
		}
		scores := expectedScores(r, names, map[string]bool{victim: true}, probeCPU.MilliValue())
		want := argmax(scores)
		t.Logf("expected scores with %s expired: %v", victim, scores)
		if want != "e2e-node-10" {
			t.Fatalf("formula picks %s (%v); want the 10 %% node once the 25 %% node is neutral", want, scores)
		}
		if got := schedule(ctx, t, c, ns, "probe-expired", probeCPU); got != want {
			t.Errorf("pod landed on %s, want %s: expired metrics must score neutral (%d)", got, want, neutralScore)
		}
	})

	t.Run("with the load watcher killed, pods are still scheduled", func(t *testing.T) {
		failedBefore := stack.Fetches(metrics(), "TargetLoadPacking", "")
		c.StopComponent(st.Watcher.Process)
		if got := schedule(ctx, t, c, ns, "probe-no-watcher", probeCPU); got == "" {
			t.Fatal("pod not scheduled with the load watcher down")
		}
		// Prove the watcher really was unreachable for the scheduler, then let every node's
		// metrics expire (the no-signal path) and schedule again.
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return stack.Fetches(metrics(), "TargetLoadPacking", "") > failedBefore, nil
		}); err != nil {
			t.Errorf("no failed fetch counted after killing the load watcher")
		}
		time.Sleep((e2eExpirySecs + e2eRefreshSecs + 2) * time.Second)
		if got := schedule(ctx, t, c, ns, "probe-no-signal", probeCPU); got == "" {
			t.Fatal("pod not scheduled once every node's metrics expired")
		}
	})
}

// expectedScores applies the plugin's exported formula to what /watcher serves, for a pod of
// podMilli CPU (a Guaranteed pod: its limit is the prediction); expired nodes get neutral.
func expectedScores(r *loadapi.Response, nodes []string, expired map[string]bool, podMilli int64) map[string]float64 {
	out := map[string]float64{}
	for _, n := range nodes {
		cpu, ok := stack.CPU(r, n)
		if !ok || expired[n] {
			out[n] = neutralScore
			continue
		}
		u := targetloadpacking.PredictedUtilization(cpu, nodeMilliCPU, podMilli)
		out[n] = targetloadpacking.ScoreForUtilization(e2eTarget, u)
	}
	return out
}

// argmax is the node with the highest rounded score; ties (which would make placement a coin
// toss) return "".
func argmax(scores map[string]float64) string {
	type kv struct {
		n string
		s int64
	}
	var all []kv
	for n, s := range scores {
		all = append(all, kv{n, int64(s + 0.5)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].s > all[j].s })
	if len(all) > 1 && all[0].s == all[1].s {
		return ""
	}
	return all[0].n
}

// guaranteedPod requests and limits cpu (so TargetLoadPacking predicts exactly cpu) and runs
// on the e2e nodes only.
func guaranteedPod(ns, name, kase string, cpu resource.Quantity) *corev1.Pod {
	spec := framework.PodSpec(e2eScheduler, cpu.String(), "64Mi")
	for i := range spec.Containers {
		spec.Containers[i].Resources.Limits = spec.Containers[i].Resources.Requests.DeepCopy()
	}
	spec.NodeSelector = map[string]string{"berth.io/e2e": "loadaware"}
	return framework.Pod(ns, name, map[string]string{"case": kase}, spec)
}

// schedule creates one pod and returns the node it ran on.
func schedule(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name string, cpu resource.Quantity) string {
	t.Helper()
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, guaranteedPod(ns, name, name, cpu), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := framework.WaitPods(ctx, c.Client, ns, "case="+name, 1, time.Minute, framework.Running)
	if err != nil {
		t.Fatal(err)
	}
	return pods[0].Spec.NodeName
}
