package autoscalepack

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/simagents"
	"github.com/berth-sched/berth/e2e/stack"
)

// The scenario (issue 37, "the packing check"): a pool an autoscaler grew for yesterday's peak
// (peakPods pods, one per node, each requesting most of a 4-CPU node), and a low-load workload
// (workPods pods using a fraction of what they request) that arrives while the peak still holds
// the nodes. Then the peak goes. Under the chart's pack preset the workload sits on as few
// nodes as its requests allow, so the rest are empty and Karpenter removes them; under the
// stock scheduler (LeastAllocated spreads) every node keeps a workload pod and nothing goes.
const (
	peakPods        = 10
	workPods        = 20
	peakRequest     = "2500m"
	workRequest     = "250m"
	workUse         = "60m"
	consolidateWait = 10 * time.Second
	poolLabel       = cluster.AutoscaledPoolLabel
	nodePool        = "pack-pool"
)

// arm is one scheduler the workload is placed by, from the same starting state.
type arm struct {
	name          string
	schedulerName string
}

type outcome struct {
	nodes, empty, removed int
	kept                  []string // nodes holding a workload pod
}

func TestPackedNodesAreRemoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{})
	if _, err := c.StartKarpenter(ctx, cluster.KarpenterOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(cluster.NodePoolGVR).Create(ctx, packPool(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err := stack.Start(ctx, c, stack.Options{Prefix: "pack-"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := simagents.Start(ctx, c, simagents.Options{NodeSelector: map[string]string{poolLabel: "true"},
		WatcherURL: st.Watcher.URL, BaseCPU: 5, BaseMemory: 20, Sample: 200 * time.Millisecond, Report: time.Second,
		Windows: []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second}, Dir: filepath.Join(c.Dir, "simagents")}); err != nil {
		t.Fatal(err)
	}
	cfg, err := packConfig(st.Watcher.URL)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-pack", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := stack.SchedulerMetrics(ctx, c, sched.Port)
	if err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitFetched(ctx, metrics, "TargetLoadPacking", time.Minute); err != nil {
		t.Fatalf("berth-scheduler never fetched the load watcher: %v\n%s", err, sched.Tail(20))
	}

	got := map[string]outcome{}
	for _, a := range []arm{{"pack", "berth-scheduler"}, {"stock", corev1.DefaultSchedulerName}} {
		got[a.name] = runArm(ctx, t, c, st, a)
		t.Logf("%s: %d nodes after the peak, %d left empty by the workload, %d removed by Karpenter", a.name,
			got[a.name].nodes, got[a.name].empty, got[a.name].removed)
	}
	pack, stock := got["pack"], got["stock"]
	if pack.empty*10 < pack.nodes*3 {
		t.Errorf("pack left %d of %d nodes empty, want at least 30%%", pack.empty, pack.nodes)
	}
	if pack.removed != pack.empty {
		t.Errorf("pack: Karpenter removed %d of the %d empty nodes, want all", pack.removed, pack.empty)
	}
	if stock.empty != 0 || stock.removed != 0 {
		t.Errorf("stock scheduler: %d nodes empty and %d removed, want none (it spreads the workload)", stock.empty, stock.removed)
	}
}

// runArm grows the pool for the peak, places the workload with a's scheduler, ends the peak
// and counts what Karpenter removes; it leaves the pool empty again (every node gone), the
// state the next arm starts from.
func runArm(ctx context.Context, t *testing.T, c *cluster.Cluster, st *stack.Stack, a arm) outcome {
	t.Helper()
	ns := "pack-" + a.name
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	for i := range peakPods {
		createPod(ctx, t, c, ns, fmt.Sprintf("peak-%d", i), "peak", corev1.DefaultSchedulerName, peakRequest, "10m")
	}
	if _, err := framework.WaitPods(ctx, c.Client, ns, "role=peak", peakPods, 4*time.Minute, framework.Running); err != nil {
		t.Fatalf("%s: the peak never ran on Karpenter's nodes: %v", a.name, err)
	}
	nodes := poolNodes(ctx, t, c)
	if len(nodes) != peakPods {
		t.Fatalf("%s: Karpenter made %d nodes for %d peak pods (%v), want one each", a.name, len(nodes), peakPods, nodes)
	}
	waitAgents(ctx, t, st, nodes)
	for i := range workPods {
		createPod(ctx, t, c, ns, fmt.Sprintf("work-%d", i), "work", a.schedulerName, workRequest, workUse)
		// Pods arrive one after another as a rollout's do, each placed with the ones before it known.
		time.Sleep(300 * time.Millisecond)
	}
	work, err := framework.WaitPods(ctx, c.Client, ns, "role=work", workPods, 3*time.Minute, framework.Running)
	if err != nil {
		t.Fatalf("%s: the workload did not run: %v", a.name, err)
	}
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "role=peak"}); err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, p := range work {
		held[p.Spec.NodeName] = true
	}
	o := outcome{nodes: len(nodes)}
	for _, n := range nodes {
		if held[n] {
			o.kept = append(o.kept, n)
		} else {
			o.empty++
		}
	}
	// Every empty node should go within consolidateAfter plus one disruption loop; wait that
	// long (the goal: consolidateAfter + 60 s), then count what went (a node of the workload must stay).
	deadline := consolidateWait + 60*time.Second
	_ = wait.PollUntilContextTimeout(ctx, 2*time.Second, deadline, true, func(ctx context.Context) (bool, error) {
		return len(poolNodes(ctx, t, c)) <= len(o.kept), nil
	})
	left := map[string]bool{}
	for _, n := range poolNodes(ctx, t, c) {
		left[n] = true
	}
	for _, n := range nodes {
		if !left[n] {
			o.removed++
			if held[n] {
				t.Errorf("%s: Karpenter removed node %s, which holds workload pods", a.name, n)
			}
		}
	}
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(poolNodes(ctx, t, c)) == 0, nil
	}); err != nil {
		t.Fatalf("%s: the pool never emptied after the workload went (%v): the next arm would not start from the same state", a.name, poolNodes(ctx, t, c))
	}
	return o
}

// packPool is the local cluster's plain autoscaled pool, of 4-CPU KWOK nodes only (so one peak
// pod fills one node), removed when empty.
func packPool() *unstructured.Unstructured {
	s := cluster.AutoscaledNodePool(nodePool, false, consolidateWait)
	s.Requirements = append(s.Requirements, corev1.NodeSelectorRequirement{
		Key: "karpenter.kwok.sh/instance-cpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"4"}})
	return cluster.NodePoolObject(s)
}

// packConfig is what the chart's default (scheduler.loadAware.mode pack) renders through the
// operator's own renderer: TargetLoadPacking at 60 alone, the default scores off.
func packConfig(watcherURL string) (string, error) {
	spec := fmt.Sprintf(`apiVersion: berth.dev/v1alpha1
kind: SecondaryScheduler
metadata: {name: pack, namespace: kube-system}
spec:
  schedulerName: berth-scheduler
  image: unused
  plugins:
    disableDefaultScore: true
    targetLoadPacking:
      weight: 1
      args:
        watcherAddress: %s
        refreshIntervalSeconds: 1
        targetUtilization: 60
        defaultRequests: {cpu: "1"}
        defaultRequestsMultiplier: "1.5"
`, watcherURL)
	return framework.SchedulerConfigFromSpec(spec)
}

func createPod(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name, role, scheduler, request, use string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"role": role},
			Annotations: map[string]string{simagents.UseAnnotation: use}},
		Spec: corev1.PodSpec{
			SchedulerName: scheduler,
			NodeSelector:  map[string]string{poolLabel: "true"},
			Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(request), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// poolNodes are the pool's nodes the API server holds, by name.
func poolNodes(ctx context.Context, t *testing.T, c *cluster.Cluster) []string {
	t.Helper()
	l, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: poolLabel + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range l.Items {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out
}

// waitAgents waits until the load watcher serves every node fresh: the scheduler then scores
// the pool on measured load, not the neutral score of an unknown node.
func waitAgents(ctx context.Context, t *testing.T, st *stack.Stack, nodes []string) {
	t.Helper()
	if _, err := stack.WaitFresh(ctx, st.Watcher.URL, nodes, 2*time.Minute); err != nil {
		t.Fatalf("the agents of %s never reported: %v", strings.Join(nodes, ", "), err)
	}
}
