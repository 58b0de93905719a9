// Package autoscale proves instance isolation with a real autoscaler (issue 37): Karpenter's
// KWOK provider (bin/karpenter) beside the local cluster, with a NodePool for the isolation pool
// (the pool's label and taint, the autoscaler marker Exists, WhenEmpty, a short
// consolidateAfter), the real berth-scheduler with the operator's InstanceIsolation profiles,
// and the real berth-operator serving the chart's isolation webhook (its arguments, its RBAC,
// its policies). The pool starts empty: every node is one Karpenter makes. KWOK nodes: needs no
// root.
package autoscale

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/berthctl"
	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

const (
	// classes arrive at once on the empty pool, podsPerClass pods each.
	classes      = 20
	podsPerClass = 2
	// deleted of the classes go in the scale-down case; the others must stay untouched.
	deleted = 10
	// consolidateAfter is the NodePool's (short, so the suite does not wait ten minutes);
	// disruptionLoop is what Karpenter may add on top of it before a node is gone.
	consolidateAfter = 10 * time.Second
	disruptionLoop   = 60 * time.Second
	// scaleUpTimeout bounds the wait for every class's pods to be Running on Karpenter's nodes.
	scaleUpTimeout = 3 * time.Minute

	relNS        = "berth-system"
	tenantNS     = "autoscale"
	nodePool     = "isolation"
	mainProfile  = "berth-scheduler"
	isolatedProf = "berth-scheduler-isolated"
	operatorUser = "berth-operator-autoscale"
)

// values are the chart's: InstanceIsolation on, the webhook in mode MODE. berth-scheduler runs
// as user berth-scheduler here, not the chart's ServiceAccount, so it is named a pool binder.
func values(t testing.TB, mode string, marker bool) map[string]any {
	t.Helper()
	doc := fmt.Sprintf(`
scheduler: {plugins: {instanceIsolation: {enabled: true, isolatedProfileName: %s}}}
isolation: {enabled: true, mode: %s, failurePolicy: Fail, extraPoolBinders: [berth-scheduler],
  autoscalerMarker: {enabled: %v}}
`, isolatedProf, mode, marker)
	var v map[string]any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

type env struct {
	c   *cluster.Cluster
	dyn dynamic.Interface
	// operator is the chart's operator Deployment as rendered.
	operator *appsv1.Deployment
}

// start brings up the cluster, Karpenter with the isolation pool's NodePool, berth-scheduler
// and the operator serving the chart's webhook in mode.
func start(ctx context.Context, t testing.TB, mode string, marker bool) *env {
	t.Helper()
	// Classed pods go to berth-scheduler (the webhook sets it); no stock scheduler, except in
	// mode ipp, where the stock scheduler places them (the bench's IPP arm).
	c := framework.StartCluster(ctx, t, cluster.Config{Logf: t.Logf, WithoutDefaultScheduler: mode != "ipp"})
	for _, ns := range []string{relNS, tenantNS} {
		if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
			t.Fatal(err)
		}
	}
	r, err := chart.Render("berth", relNS, values(t, mode, marker))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := framework.InstanceIsolationProfiles(mainProfile, isolatedProf, 10, configv1.InstanceIsolationArgs{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Config: framework.SchedulerConfig(profiles)}); err != nil {
		t.Fatal(err)
	}
	framework.StartChartIsolation(ctx, t, c, framework.ChartIsolation{Objs: objs, ReleaseNamespace: relNS, OperatorUser: operatorUser,
		Set: map[string]string{"--isolation-autoscaler-marker": fmt.Sprint(marker)}})
	pool := cluster.IsolationNodePool(nodePool,
		corev1.NodeSelectorRequirement{Key: "ipp", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
		corev1.Taint{Key: "ipp", Value: "true", Effect: corev1.TaintEffectNoSchedule}, consolidateAfter)
	dyn := framework.StartKarpenter(ctx, t, c, pool)
	e := &env{c: c, dyn: dyn, operator: &appsv1.Deployment{}}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "berth-operator" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, e.operator); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.waitWebhook(ctx, t, mode)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("karpenter log tail:\n%s", tail(c, cluster.Karpenter, 40))
			t.Logf("berth-scheduler log tail:\n%s", tail(c, "berth-scheduler", 40))
		}
	})
	return e
}

func tail(c *cluster.Cluster, name string, n int) string {
	for _, p := range c.Processes() {
		if p.Name == name {
			return p.Tail(n)
		}
	}
	return "(not running)"
}

// waitWebhook waits until the API server calls the operator's webhook: a classed dry-run pod
// comes back with berth-scheduler's name (mode ipp: with IPP's anti-affinity term).
func (e *env) waitWebhook(ctx context.Context, t testing.TB, mode string) {
	t.Helper()
	probe := classPod("probe", "probe")
	var last string
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := e.c.Client.CoreV1().Pods(tenantNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = "schedulerName " + got.Spec.SchedulerName
		if mode == "ipp" {
			return got.Spec.Affinity != nil && got.Spec.Affinity.PodAntiAffinity != nil, nil
		}
		return strings.HasPrefix(got.Spec.SchedulerName, mainProfile), nil
	}); err != nil {
		t.Fatalf("the webhook never mutated a classed pod: %s", last)
	}
}

func className(i int) string { return fmt.Sprintf("class-%02d", i) }

// classPod is a tenant's pod of class: the webhook adds the rest.
func classPod(name, class string) *corev1.Pod {
	return framework.Pod(tenantNS, name, map[string]string{framework.ClassLabel: class}, framework.PodSpec("", "100m", "64Mi"))
}

// createClasses creates podsPerClass pods of each class at once.
func (e *env) createClasses(ctx context.Context, t testing.TB) {
	t.Helper()
	for i := 0; i < classes; i++ {
		for j := 0; j < podsPerClass; j++ {
			if _, err := e.c.Client.CoreV1().Pods(tenantNS).Create(ctx, classPod(fmt.Sprintf("%s-%d", className(i), j), className(i)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// placement is what the suite reads back: each pod's node and UID, each node's classes.
type placement struct {
	podNode map[string]string // pod -> node
	podUID  map[string]string
	classes map[string]map[string]bool // node -> classes
	pods    []corev1.Pod
}

func (e *env) read(ctx context.Context) (*placement, error) {
	l, err := e.c.Client.CoreV1().Pods(tenantNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	p := &placement{podNode: map[string]string{}, podUID: map[string]string{}, classes: map[string]map[string]bool{}, pods: l.Items}
	for _, pod := range l.Items {
		p.podNode[pod.Name], p.podUID[pod.Name] = pod.Spec.NodeName, string(pod.UID)
		if pod.Spec.NodeName == "" {
			continue
		}
		if p.classes[pod.Spec.NodeName] == nil {
			p.classes[pod.Spec.NodeName] = map[string]bool{}
		}
		p.classes[pod.Spec.NodeName][pod.Labels[framework.ClassLabel]] = true
	}
	return p, nil
}

// waitAllRunning waits until every pod of every class is Running and returns the placement.
func (e *env) waitAllRunning(ctx context.Context, t testing.TB) *placement {
	t.Helper()
	var p *placement
	var last string
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, time.Second, scaleUpTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if p, err = e.read(ctx); err != nil {
			last = err.Error()
			return false, nil
		}
		notRunning := 0
		for _, pod := range p.pods {
			if pod.Status.Phase != corev1.PodRunning {
				notRunning++
			}
		}
		claims, _ := cluster.NodeClaims(ctx, e.dyn, nodePool)
		last = fmt.Sprintf("%d of %d pods not Running, %d NodeClaims", notRunning, len(p.pods), len(claims))
		return len(p.pods) == classes*podsPerClass && notRunning == 0, nil
	})
	if err != nil {
		t.Fatalf("not every classed pod Running after %s: %s", scaleUpTimeout, last)
	}
	t.Logf("%d classes x %d pods Running %s after creation", classes, podsPerClass, time.Since(start).Round(time.Second))
	return p
}

// checkIsolated: no node with two classes, every classed pod's node Karpenter's in the
// isolation pool, the classes on exactly one node each; and with exact, one NodeClaim and one
// node per class. Why exact only with the marker: a node Karpenter makes for a class carries
// that class's marker from its NodeClaim on, so no other class can take it; without the marker
// (mode both) nothing ties a new node to the class it was made for, and Karpenter may make more
// than one node per class (seen once on a loaded machine: 21 NodeClaims for 20 classes, every
// class still on its own node).
func (e *env) checkIsolated(ctx context.Context, t testing.TB, p *placement, exact bool) {
	t.Helper()
	claims, err := cluster.NodeClaims(ctx, e.dyn, nodePool)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) < classes || (exact && len(claims) != classes) {
		t.Errorf("%d NodeClaims for %d classes: %v", len(claims), classes, claims)
	} else if len(claims) != classes {
		t.Logf("%d NodeClaims for %d classes (without the marker a class may take a node made for another)", len(claims), classes)
	}
	nodes, err := e.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: cluster.KarpenterNodePoolLabel + "=" + nodePool})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) < classes || (exact && len(nodes.Items) != classes) {
		t.Errorf("%d nodes of NodePool %s for %d classes", len(nodes.Items), nodePool, classes)
	}
	if len(p.classes) != classes {
		t.Errorf("pods on %d nodes, want %d (one per class)", len(p.classes), classes)
	}
	for node, cls := range p.classes {
		if len(cls) > 1 {
			t.Errorf("node %s holds classes %v", node, sortedKeys(cls))
		}
		n, err := e.c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[cluster.KarpenterNodePoolLabel] != nodePool || n.Labels["ipp"] != "true" {
			t.Errorf("pods on node %s, which is not Karpenter's isolation pool node (labels %v)", node, n.Labels)
		}
	}
}

// TestAutoscaleBothMode: mode both without the marker, the path Karpenter already simulated
// before issue 37 (IPP's anti-affinity term): classes pods at once on an empty pool get at
// least one NodeClaim and node each, every class on a node of its own.
func TestAutoscaleBothMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := start(ctx, t, "both", false)
	e.createClasses(ctx, t)
	p := e.waitAllRunning(ctx, t)
	e.checkIsolated(ctx, t, p, false)
	for _, pod := range p.pods {
		if pod.Spec.Affinity == nil || pod.Spec.Affinity.PodAntiAffinity == nil {
			t.Errorf("pod %s has no anti-affinity term in mode both", pod.Name)
			break
		}
	}
	e.checkStatusNamesNodePools(ctx, t)
}

// checkStatusNamesNodePools runs kubectl berth status' collection against the real API server,
// with the chart's operator Deployment (scaled to 0: only its arguments are read) and two more
// NodePools: one without the pool's taint (fails, naming the taint) and a plain autoscaled
// pool (listed as another pool). The suite's own pool is ok.
func (e *env) checkStatusNamesNodePools(ctx context.Context, t testing.TB) {
	t.Helper()
	d := e.operator
	d.Spec.Replicas = new(int32)
	if _, err := e.c.Client.AppsV1().Deployments(relNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	noTaint := cluster.IsolationNodePool("no-taint",
		corev1.NodeSelectorRequirement{Key: "ipp", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}, corev1.Taint{}, consolidateAfter)
	noTaint.Taints, noTaint.CPULimit = nil, "0" // CPU limit 0: it never makes a node
	plain := cluster.AutoscaledNodePool("plain", true, consolidateAfter)
	plain.CPULimit = "0"
	for _, s := range []cluster.NodePoolSpec{noTaint, plain} {
		if _, err := e.dyn.Resource(cluster.NodePoolGVR).Create(ctx, cluster.NodePoolObject(s), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	view, err := berthctl.CollectStatus(ctx, berthctl.StatusInput{Client: e.c.Client, Dynamic: e.dyn, BerthNamespace: relNS, Now: time.Now(),
		// why: only the nodepool lines are under test; the Lease and the watcher are not read.
		LeaseErr: errors.New("not read here"), WatcherErr: errors.New("not read here")})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]berthctl.Check{}
	for _, c := range view.Checks {
		if c.Area == "nodepool" {
			got[c.Name] = c
		}
	}
	for _, tc := range []struct{ pool, state, detail string }{
		{nodePool, berthctl.OK, "makes isolation pool nodes"},
		{"no-taint", berthctl.Fail, "lacks the taint ipp=true:NoSchedule"},
		{"plain", berthctl.OK, "not for the isolation pool"},
	} {
		c, ok := got[tc.pool]
		if !ok || c.State != tc.state || !strings.Contains(c.Detail, tc.detail) {
			t.Errorf("kubectl berth status on NodePool %s: %+v, want %s %q (all nodepool checks: %+v)", tc.pool, c, tc.state, tc.detail, got)
		}
	}
}

// TestAutoscaleBerthModeMarker: mode berth with the autoscaler marker: the same goals with no
// anti-affinity term in any pod, each node's marker the class's value; then deleting deleted of
// the classes removes their nodes within consolidateAfter plus a disruption loop and leaves the
// other classes' nodes and pods as they were.
func TestAutoscaleBerthModeMarker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := start(ctx, t, "berth", true)
	e.createClasses(ctx, t)
	p := e.waitAllRunning(ctx, t)
	e.checkIsolated(ctx, t, p, true)
	for _, pod := range p.pods {
		if a := pod.Spec.Affinity; a != nil && (a.PodAntiAffinity != nil || a.PodAffinity != nil) {
			t.Errorf("pod %s carries a pod (anti-)affinity term in mode berth: %+v", pod.Name, a)
		}
		want := classmarker.MarkerValue(classmarker.Effective(tenantNS, pod.Labels[framework.ClassLabel], false))
		n, err := e.c.Client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Labels[classmarker.Key]; got != want {
			t.Errorf("pod %s on node %s: marker %q, want %q", pod.Name, n.Name, got, want)
		}
	}
	if t.Failed() {
		return
	}

	// Scale-down: the first deleted classes go.
	gone := map[string]bool{}
	keep := map[string]string{} // node -> class of the classes that stay
	for node, cls := range p.classes {
		for c := range cls {
			var i int
			fmt.Sscanf(c, "class-%d", &i)
			if i < deleted {
				gone[node] = true
			} else {
				keep[node] = c
			}
		}
	}
	for i := 0; i < deleted; i++ {
		for j := 0; j < podsPerClass; j++ {
			if err := e.c.Client.CoreV1().Pods(tenantNS).Delete(ctx, fmt.Sprintf("%s-%d", className(i), j), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deletedAt := time.Now()
	limit := consolidateAfter + disruptionLoop
	var left []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, limit, true, func(ctx context.Context) (bool, error) {
		left = nil
		for node := range gone {
			if _, err := e.c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left = append(left, node)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		sort.Strings(left)
		t.Fatalf("%d emptied nodes still there %s after their classes were deleted (consolidateAfter %s): %v", len(left), limit, consolidateAfter, left)
	}
	t.Logf("%d emptied nodes removed %s after their classes were deleted", len(gone), time.Since(deletedAt).Round(time.Second))

	after, err := e.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.pods) != (classes-deleted)*podsPerClass {
		t.Errorf("%d pods left, want %d", len(after.pods), (classes-deleted)*podsPerClass)
	}
	for _, pod := range after.pods {
		if pod.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s of a live class is %s", pod.Name, pod.Status.Phase)
		}
		if uid := p.podUID[pod.Name]; uid != string(pod.UID) || p.podNode[pod.Name] != pod.Spec.NodeName {
			t.Errorf("pod %s of a live class changed: UID %s -> %s, node %s -> %s", pod.Name, uid, pod.UID, p.podNode[pod.Name], pod.Spec.NodeName)
		}
	}
	for node, class := range keep {
		n, err := e.c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Errorf("node %s of live class %s: %v", node, class, err)
			continue
		}
		if n.DeletionTimestamp != nil {
			t.Errorf("node %s of live class %s is being deleted", node, class)
		}
	}
	claims, err := cluster.NodeClaims(ctx, e.dyn, nodePool)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != classes-deleted {
		t.Errorf("%d NodeClaims after the scale-down, want %d: %v", len(claims), classes-deleted, claims)
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// strandWait is how long the control case watches classes wait for a node that never comes.
const strandWait = 45 * time.Second

// TestAutoscaleBerthModeWithoutMarkerStrandsClasses is the control the marker answers (the
// issue's report): mode berth without the marker gives Karpenter nothing that tells classes
// apart, so it packs them onto shared NodeClaims that InstanceIsolation then refuses to
// share, and classes stay Pending with fewer NodeClaims than classes.
func TestAutoscaleBerthModeWithoutMarkerStrandsClasses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := start(ctx, t, "berth", false)
	e.createClasses(ctx, t)
	time.Sleep(strandWait)
	p, err := e.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending := 0
	for _, pod := range p.pods {
		if pod.Spec.NodeName == "" {
			pending++
		}
	}
	claims, err := cluster.NodeClaims(ctx, e.dyn, nodePool)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("without the marker, after %s: %d NodeClaims for %d classes, %d of %d pods unplaced", strandWait, len(claims), classes, pending, len(p.pods))
	if pending == 0 || len(claims) >= classes {
		t.Errorf("want classes stranded without the marker (fewer NodeClaims than classes, pods Pending); got %d NodeClaims, %d pending", len(claims), pending)
	}
	for node, cls := range p.classes {
		if len(cls) > 1 {
			t.Errorf("node %s holds classes %v: InstanceIsolation let two classes share it", node, sortedKeys(cls))
		}
	}
}
