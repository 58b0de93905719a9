package loadaware

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
	"github.com/berth-sched/berth/pkg/decisionapi"
)

// TestReplicaEstimatedFromSiblings: a Deployment's 3 replicas, each asking 1 CPU, are measured
// by their nodes' agents at 2 % of an 8-CPU node (160m). Once the scheduler has learned them
// (bound over a minute, measured in a document it took), a 4th replica counts at the profile
// (about 160m), not at its spec (1000m): its decision record says so, read back from the
// running berth-scheduler. With namespaceMinPods 3, the same three measured pods make their
// namespace's use-to-request ratio (0.16 ± 0): a bare pod of the namespace asking 1 CPU then
// counts at 160m, source namespace, and a bare pod of another namespace at its spec.
func TestReplicaEstimatedFromSiblings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := shared
	const (
		sched = "berth-loadaware-profile"
		ns    = "loadaware-profile"
		usage = 2.0 // % of the node per replica
	)
	loads := []stack.NodeLoad{{Name: "prof-a", CPU: 20, Memory: 40}, {Name: "prof-b", CPU: 20, Memory: 40}}
	for _, n := range loads {
		if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: "8", Memory: "16Gi", Labels: map[string]string{"berth.io/e2e": "profile"}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := stack.Start(ctx, c, stack.Options{Prefix: "prof-", Nodes: loads})
	if err != nil {
		t.Fatal(err)
	}
	tlp := strings.Replace(stack.TLPConfig(sched, st.Watcher.URL, 40, 60, 1), "watcherTimeoutSeconds: 2\n",
		"watcherTimeoutSeconds: 2\n      workloadProfiles: {namespaceMinPods: 3}\n", 1)
	config, err := framework.WithDecisionRecord(tlp, nil)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-profile", Config: config})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := stack.SchedulerMetrics(ctx, c, proc.Port)
	if err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitFetched(ctx, metrics, "TargetLoadPacking", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()
	deploy := profileDeployment(ns, sched, 3)
	deps := c.Client.AppsV1().Deployments(ns)
	if _, err := deps.Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := framework.WaitPods(ctx, c.Client, ns, "app=web", 3, 2*time.Minute, framework.Running)
	if err != nil {
		t.Fatal(err)
	}
	measure := func(pods []corev1.Pod) {
		t.Helper()
		byNode := map[string][]fixture.Pod{}
		for _, n := range loads {
			byNode[n.Name] = []fixture.Pod{{UID: string(st.AgentPods[n.Name].UID), QOS: "besteffort"}}
		}
		for _, p := range pods {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], fixture.Pod{UID: string(p.UID), CPU: usage, MemoryBytes: 64 << 20})
		}
		for node, fx := range byNode {
			if err := st.Agents[node].Fixture.SetPods(fx); err != nil {
				t.Fatal(err)
			}
		}
	}
	measure(pods)
	// A pod is learned once bound a minute (a starting pod is not yet what it will use); the
	// scheduler refreshes every second.
	time.Sleep(70 * time.Second)
	known := map[string]bool{}
	for _, p := range pods {
		known[p.Name] = true
	}
	if _, err := deps.Patch(ctx, deploy.Name, "application/merge-patch+json", []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	all, err := framework.WaitPods(ctx, c.Client, ns, "app=web", 4, time.Minute, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	if err != nil {
		t.Fatal(err)
	}
	var fourth string
	for _, p := range all {
		if !known[p.Name] {
			fourth = p.Name
		}
	}
	ec, err := framework.NewExplainClient(c, proc.Port)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ec.WaitRecord(ctx, ns, fourth, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	checkProfileRecord(t, rec, 1000, usage/100*8000)

	// A bare pod of the namespace: its namespace's ratio. One of another namespace: its spec.
	other := ns + "-other"
	if err := framework.EnsureNamespace(ctx, c.Client, other); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), other, metav1.DeleteOptions{})
	}()
	for _, tc := range []struct {
		ns, source string
		want       float64
	}{{ns, decisionapi.EstimateFromNamespace, usage / 100 * 8000}, {other, decisionapi.EstimateFromSpec, 1000}} {
		spec := profileDeployment(tc.ns, sched, 1).Spec.Template.Spec
		bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "bare"}, Spec: spec}
		if _, err := c.Client.CoreV1().Pods(tc.ns).Create(ctx, bare, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rec, err := ec.WaitRecord(ctx, tc.ns, "bare", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		checkNamespaceRecord(t, rec, tc.source, tc.want)
	}
}

// checkProfileRecord: the chosen node's TargetLoadPacking detail counts the pod at a profile
// of 3 siblings near want millicores, not at its spec.
func checkProfileRecord(t *testing.T, rec decisionapi.Record, spec int64, want float64) {
	t.Helper()
	d := chosenTLP(t, rec)
	e := d.PodEstimate
	if e.Source != decisionapi.EstimateFromProfile || e.Samples != 3 {
		t.Fatalf("pod estimate %+v: want the profile of 3 siblings", e)
	}
	if got := float64(d.PodMilliCPU); got < 0.75*want || got > 1.5*want || d.PodMilliCPU >= spec || d.PodMilliCPU != e.EstimateMilliCPU {
		t.Errorf("pod counted at %dm (profile estimate %dm): want about %vm, below the spec's %dm", d.PodMilliCPU, e.EstimateMilliCPU, want, spec)
	}
}

// checkNamespaceRecord: the chosen node's TargetLoadPacking detail counts a bare pod from
// source at about want millicores.
func checkNamespaceRecord(t *testing.T, rec decisionapi.Record, source string, want float64) {
	t.Helper()
	d := chosenTLP(t, rec)
	e := d.PodEstimate
	if e.Source != source || e.Reason != "no controlling owner" {
		t.Fatalf("pod estimate %+v: want source %s, no controlling owner", e, source)
	}
	if got := float64(d.PodMilliCPU); got < 0.75*want || got > 1.5*want {
		t.Errorf("pod counted at %dm: want about %vm", d.PodMilliCPU, want)
	}
	if source == decisionapi.EstimateFromNamespace && (e.Namespace == nil || e.Namespace.Pods != 3 || e.Namespace.EstimateMilliCPU != d.PodMilliCPU) {
		t.Errorf("record's namespace ratio %+v: want 3 pods, estimate %dm", e.Namespace, d.PodMilliCPU)
	}
}

// chosenTLP is the TargetLoadPacking detail of the record's chosen node (logged).
func chosenTLP(t *testing.T, rec decisionapi.Record) *decisionapi.LoadDetail {
	t.Helper()
	for _, n := range rec.Nodes {
		if !n.Chosen {
			continue
		}
		d, ok := n.Load("TargetLoadPacking")
		if !ok {
			t.Fatalf("chosen node %s has no TargetLoadPacking detail", n.Node)
		}
		t.Logf("record of %s/%s: %s", rec.Namespace, rec.Name, n.InputLines()[0])
		return d
	}
	t.Fatalf("record has no chosen node: %+v", rec)
	return nil
}

// profileDeployment is a Deployment of replicas asking 1 CPU each (limit = request: the spec
// estimate is 1000m), kept on the test's nodes and scheduled by sched.
func profileDeployment(ns, sched string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	spec := framework.PodSpec(sched, "1", "128Mi")
	for i := range spec.Containers {
		spec.Containers[i].Resources.Limits = spec.Containers[i].Resources.Requests.DeepCopy()
	}
	spec.NodeSelector = map[string]string{"berth.io/e2e": "profile"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}
