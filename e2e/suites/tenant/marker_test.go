package tenant

// TestTenantAutoscalerMarker (issue 37 items 2-3, "isolation the autoscaler can see"): on the
// real API server, with the chart's webhook configuration and policies (autoscaler marker on, a
// short emptyGrace), the real berth-operator binary under the chart's RBAC (its marker role: patch
// on nodes) serving the webhook and writing the marker, and the real berth-scheduler:
//   - a tenant's classed pod gets the marker's two node-affinity terms and no anti-affinity, and
//     the node it is bound to is labelled with its class's marker;
//   - with every pool node held, a further class's FailedScheduling event names the class;
//   - the marker goes emptyGrace after the node's last classed pod leaves (not before), and the
//     waiting class then gets the node and its marker;
//   - the operator killed between a binding and its write: restarted, it writes the missing
//     marker, rewrites a wrong one at once and removes a stale one a grace after its start;
//   - a tenant (edit in its namespace) whose pod selects another class's marker, or selects the
//     marker without a class, is refused by the webhook and, with the webhook gone, by the
//     policy, both naming the marker key and value.
// KWOK nodes: needs no root.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

const (
	mkRed, mkBlue = "mk-red", "mk-blue"
	mkGrace       = 6 * time.Second
)

func TestTenantAutoscalerMarker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{Logf: t.Logf, WithoutDefaultScheduler: true})
	cs := c.Client
	for _, ns := range []string{nnRelNS, mkRed, mkBlue} {
		if err := framework.EnsureNamespace(ctx, cs, ns); err != nil {
			t.Fatal(err)
		}
	}
	var v map[string]any
	if err := yaml.Unmarshal([]byte(nnValues), &v); err != nil {
		t.Fatal(err)
	}
	v["isolation"].(map[string]any)["autoscalerMarker"] = map[string]any{"enabled": true, "emptyGrace": mkGrace.String()}
	r, err := chart.Render("berth", nnRelNS, v)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	nnApplyChart(ctx, t, cs, objs)

	poolNode := func(name string, labels map[string]string) cluster.NodeSpec {
		l := map[string]string{"ipp": "true"}
		for k, v := range labels {
			l[k] = v
		}
		return cluster.NodeSpec{Name: name, CPU: "8", Memory: "16Gi", Labels: l,
			Taints: []corev1.Taint{{Key: "ipp", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	}
	addNode := func(t *testing.T, n cluster.NodeSpec) {
		t.Helper()
		if err := c.AddNodes(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	}
	for i := 1; i <= 3; i++ {
		addNode(t, poolNode(fmt.Sprintf("mk-pool-%d", i), nil))
	}
	op := mkStart(ctx, t, c, cs, objs)

	edit := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}
	tenants := map[string]kubernetes.Interface{mkRed: clTenant(ctx, t, cs, c.RESTConfig, mkRed, "tenant", edit), mkBlue: clTenant(ctx, t, cs, c.RESTConfig, mkBlue, "tenant", edit)}
	classed := func(ns, name, class string) *corev1.Pod {
		return framework.Pod(ns, name, map[string]string{"ipp-class": class}, framework.PodSpec("", "10m", "16Mi"))
	}
	top := t
	create := func(t *testing.T, p *corev1.Pod) (*corev1.Pod, error) {
		got, err := tenants[p.Namespace].CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err == nil {
			// why: the subtests follow one cluster's story; pods live until the test ends.
			top.Cleanup(func() {
				_ = cs.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, *metav1.NewDeleteOptions(0))
			})
		}
		return got, err
	}
	mustCreate := func(t *testing.T, p *corev1.Pod) *corev1.Pod {
		t.Helper()
		got, err := create(t, p)
		if err != nil {
			t.Fatalf("%s/%s: %v", p.Namespace, p.Name, err)
		}
		return got
	}
	nodeOf := func(t *testing.T, p *corev1.Pod) string {
		t.Helper()
		var node string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			node = got.Spec.NodeName
			return node != "", nil
		}); err != nil {
			t.Fatalf("%s/%s never bound: %v", p.Namespace, p.Name, err)
		}
		return node
	}
	marker := func(node string) (string, bool) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return "", false
		}
		v, ok := n.Labels[classmarker.Key]
		return v, ok
	}
	// waitMarker waits until node's marker is want ("" absent) and returns when it saw it.
	waitMarker := func(t *testing.T, node, want string, timeout time.Duration) time.Time {
		t.Helper()
		var have string
		var ok bool
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			have, ok = marker(node)
			return (want == "" && !ok) || (want != "" && have == want), nil
		}); err != nil {
			t.Fatalf("node %s: marker %q (present %v), want %q", node, have, ok, want)
		}
		return time.Now()
	}
	value := func(ns, class string) string { return classmarker.MarkerValue(classmarker.NamespaceClass(ns, class)) }
	// why: the API server trusts the operator's injected CA a moment after it is written.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := tenants[mkRed].CoreV1().Pods(mkRed).Create(ctx, classed(mkRed, "probe", "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && p.Spec.SchedulerName == "berth-scheduler", nil
	}); err != nil {
		t.Fatal("the webhook never mutated a classed pod")
	}

	held := map[string]string{} // pod ns/name -> node
	t.Run("a classed pod carries the two marker terms, no anti-affinity, and marks its node", func(t *testing.T) {
		p := mustCreate(t, classed(mkRed, "a-1", "a"))
		want := []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "ipp", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
				{Key: classmarker.Key, Operator: corev1.NodeSelectorOpIn, Values: []string{value(mkRed, "a")}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "ipp", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
				{Key: classmarker.Key, Operator: corev1.NodeSelectorOpDoesNotExist}}},
		}
		a := p.Spec.Affinity
		if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			t.Fatalf("no required node affinity: %+v", a)
		}
		if got := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; mkJSON(got) != mkJSON(want) {
			t.Fatalf("terms %s\nwant %s", mkJSON(got), mkJSON(want))
		}
		if a.PodAntiAffinity != nil {
			t.Fatalf("anti-affinity written: %+v", a.PodAntiAffinity)
		}
		node := nodeOf(t, p)
		held["a"] = node
		waitMarker(t, node, value(mkRed, "a"), 30*time.Second)
	})

	t.Run("every pool node held: the next class's event names it; a node emptied loses its marker after the grace and the class gets it", func(t *testing.T) {
		c1 := mustCreate(t, classed(mkRed, "c-1", "c"))
		held["c"] = nodeOf(t, c1)
		waitMarker(t, held["c"], value(mkRed, "c"), 30*time.Second)
		d1 := mustCreate(t, classed(mkBlue, "d-1", "d"))
		held["d"] = nodeOf(t, d1)
		waitMarker(t, held["d"], value(mkBlue, "d"), 30*time.Second)

		e1 := mustCreate(t, classed(mkBlue, "e-1", "e"))
		ev, err := framework.WaitSchedulingEvent(ctx, cs, e1, "FailedScheduling", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if want := "no node of the pool can take instance class mk-blue/e: all 3 node(s) the pod's node affinity allows hold another instance class"; !strings.Contains(ev.Note, want) {
			t.Fatalf("FailedScheduling %q\nwant it to contain %q", ev.Note, want)
		}
		t.Logf("event: %s", ev.Note)

		gone := time.Now()
		if err := cs.CoreV1().Pods(mkBlue).Delete(ctx, d1.Name, *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		// why: class e takes the node the moment its marker goes and gets its own marker within
		// milliseconds; what is timed is when class d's marker left the node.
		var removed time.Time
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			v, ok := marker(held["d"])
			removed = time.Now()
			return !ok || v != value(mkBlue, "d"), nil
		}); err != nil {
			t.Fatalf("node %s kept class d's marker", held["d"])
		}
		// why: the grace runs from when the writer saw the node empty, after the deletion.
		if d := removed.Sub(gone); d < mkGrace-500*time.Millisecond {
			t.Fatalf("marker of %s removed %s after its last classed pod left, before the %s grace", held["d"], d, mkGrace)
		} else {
			t.Logf("marker removed %s after the pod left", d.Round(100*time.Millisecond))
		}
		if n := nodeOf(t, e1); n != held["d"] {
			t.Fatalf("class e went to %s, want the emptied %s", n, held["d"])
		}
		held["e"] = held["d"]
		delete(held, "d")
		waitMarker(t, held["e"], value(mkBlue, "e"), 30*time.Second)
	})

	t.Run("operator killed between a binding and its write: the restart repairs missing, wrong and stale markers", func(t *testing.T) {
		// Free class c's node (its marker goes after the grace), and hold a pod of class f at
		// its scheduling gate while the operator still serves the webhook.
		if err := cs.CoreV1().Pods(mkRed).Delete(ctx, "c-1", *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		free := held["c"]
		delete(held, "c")
		waitMarker(t, free, "", 30*time.Second)
		f := classed(mkRed, "f-1", "f")
		f.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "e2e.berth.dev/hold"}}
		mustCreate(t, f)

		op.Kill()
		<-op.Done()
		// The binding the writer misses: ungated, berth-scheduler binds f to the free node.
		if _, err := cs.CoreV1().Pods(mkRed).Patch(ctx, "f-1", types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if n := nodeOf(t, f); n != free {
			t.Fatalf("class f went to %s, want the free %s", n, free)
		}
		time.Sleep(time.Second)
		if v, ok := marker(free); ok {
			t.Fatalf("node %s got marker %q with no writer running", free, v)
		}
		// A wrong marker on class a's node, and a node made meanwhile (as an autoscaler would,
		// for a class whose pod never came) with a stale one.
		if _, err := cs.CoreV1().Nodes().Patch(ctx, held["a"], types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+classmarker.Key+`":"`+value(mkBlue, "wrong")+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		addNode(t, poolNode("mk-pool-4", map[string]string{classmarker.Key: value(mkBlue, "gone")}))

		start := time.Now()
		op = mkOperator(ctx, t, c, objs, "berth-operator-restarted")
		waitMarker(t, free, value(mkRed, "f"), 30*time.Second)
		waitMarker(t, held["a"], value(mkRed, "a"), 30*time.Second)
		removed := waitMarker(t, "mk-pool-4", "", 30*time.Second)
		if d := removed.Sub(start); d < mkGrace {
			t.Fatalf("stale marker removed %s after the restart began, before the %s grace", d, mkGrace)
		}
		if v, _ := marker(held["e"]); v != value(mkBlue, "e") {
			t.Fatalf("class e's node %s: marker %q changed by the restart", held["e"], v)
		}
	})

	otherMarker := value(mkBlue, "e")
	selecting := func(name string, labels map[string]string, full bool) *corev1.Pod {
		p := framework.Pod(mkRed, name, labels, framework.PodSpec("", "10m", "16Mi"))
		p.Spec.NodeSelector = map[string]string{classmarker.Key: otherMarker}
		if full {
			// why: written by hand with every constraint the webhook would add (the classed
			// policy's), so only the marker is wrong.
			p.Spec.SchedulerName = "berth-scheduler"
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "ipp", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule})
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "ipp", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}}}}}
		}
		return p
	}
	classedWords := "instance isolation: spec.nodeSelector[" + classmarker.Key + "]: selects the isolation marker " + classmarker.Key + "=" + otherMarker +
		"; a pod of instance class a may select the marker " + classmarker.Key + " only with its own class's value, which the isolation webhook writes itself"
	unclassedWords := "instance isolation: spec.nodeSelector[" + classmarker.Key + "]: selects the isolation marker " + classmarker.Key + "=" + otherMarker +
		"; only pods of an instance class (label ipp-class or berth.dev/instance-class) may select the marker " + classmarker.Key +
		", and only with their own class's value, which the isolation webhook writes itself"
	t.Run("a tenant selecting another class's marker is refused by the webhook", func(t *testing.T) {
		for _, tc := range []struct {
			pod   *corev1.Pod
			words string
		}{
			{selecting("steal", map[string]string{"ipp-class": "a"}, false), classedWords},
			{selecting("steal-full", map[string]string{"ipp-class": "a"}, true), classedWords},
			{selecting("plain", map[string]string{"app": "x"}, false), unclassedWords},
		} {
			_, err := create(t, tc.pod)
			if want := `admission webhook "` + nnHook + `" denied the request: ` + tc.words; err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("%s: %v\nwant a refusal ending with %q", tc.pod.Name, err, want)
			}
		}
		// Control: its own class's marker passes.
		own := classed(mkRed, "own", "a")
		own.Spec.NodeSelector = map[string]string{classmarker.Key: value(mkRed, "a")}
		if _, err := tenants[mkRed].CoreV1().Pods(mkRed).Create(ctx, own, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("own marker: %v", err)
		}
	})

	t.Run("with the webhook gone, the policy refuses the same pods with the same words", func(t *testing.T) {
		mkRemoveWebhook(ctx, t, cs)
		for _, tc := range []struct {
			pod   *corev1.Pod
			words string
		}{
			{selecting("steal-full", map[string]string{"ipp-class": "a"}, true), classedWords},
			{selecting("plain", map[string]string{"app": "x"}, false), unclassedWords},
		} {
			var err error
			// why: a moment passes before the API server stops calling the deleted webhook.
			_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err = tenants[mkRed].CoreV1().Pods(mkRed).Create(ctx, tc.pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"), nil
			})
			want := "ValidatingAdmissionPolicy 'berth-instance-isolation-marker' with binding 'berth-instance-isolation-marker' denied request: " + tc.words
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("%s: %v\nwant a refusal ending with %q", tc.pod.Name, err, want)
			}
		}
	})
}

// mkStart starts berth-scheduler (InstanceIsolation) and the operator serving the chart's
// webhook (installed once, pointed at the operator's loopback address) and writing the marker.
func mkStart(ctx context.Context, t *testing.T, c *cluster.Cluster, cs kubernetes.Interface, objs []*unstructured.Unstructured) *cluster.Process {
	t.Helper()
	profiles, err := framework.InstanceIsolationProfiles("berth-scheduler", "", 10, configv1.InstanceIsolationArgs{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Config: framework.SchedulerConfig(profiles)}); err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	mkAddr = fmt.Sprintf("127.0.0.1:%d", port)
	undo, err := framework.InstallChartWebhook(ctx, cs, objs, "https://"+mkAddr+webhook.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undo)
	return mkOperator(ctx, t, c, objs, "berth-operator")
}

// mkAddr is the webhook's address, kept across operator restarts.
var mkAddr string

// mkOperator starts the real operator with the chart's --isolation-* arguments as the chart's
// operator identity (nnApplyChart bound its roles to nnOpUser).
func mkOperator(ctx context.Context, t *testing.T, c *cluster.Cluster, objs []*unstructured.Unstructured, name string) *cluster.Process {
	t.Helper()
	args, err := framework.ChartIsolationArgs(objs, "berth-operator", map[string]string{
		"--isolation-webhook-bind-address": mkAddr, "--isolation-webhook-cert-hosts": "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := c.WriteKubeconfig("berth-operator-marker", cluster.Identity{User: nnOpUser})
	if err != nil {
		t.Fatal(err)
	}
	op, err := framework.StartOperator(ctx, c, framework.OperatorOptions{Name: name, Kubeconfig: kc, Args: append([]string{"--metrics-secure=false"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-operator log tail:\n%s", op.Tail(80))
		}
	})
	return op
}

// mkRemoveWebhook deletes the chart's MutatingWebhookConfiguration: the policies alone judge.
func mkRemoveWebhook(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	if err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "berth-instance-isolation", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mkJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
