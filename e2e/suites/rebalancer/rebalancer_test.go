package rebalancer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-sched/berth/api/crds"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	rb "github.com/berth-sched/berth/pkg/rebalancer"
)

const (
	schedulerName = "berth-rebalancer-e2e"
	poolLabel     = "berth.dev/e2e-pool"
)

// env is what every test shares: the load pipeline for all pools' nodes, berth-scheduler and the
// operator with the rebalancer.
type env struct {
	c     *cluster.Cluster
	st    *stack.Stack
	cl    client.Client
	sched *cluster.SchedulerProcess
	op    *cluster.Process
	// metricsURL is the running operator's /metrics.
	metricsURL string
}

// pools: per test, a hot node (95 % CPU) and a cold one (10 %), 8 CPU each.
var pools = []string{"relief", "pdb", "dryrun", "stale"}

func setup(ctx context.Context, t *testing.T) *env {
	t.Helper()
	c := shared
	crd, err := crds.Load("berth.dev_rebalancers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.InstallCRDs(ctx, c.RESTConfig, crd); err != nil {
		t.Fatal(err)
	}
	// The operator's SecondaryScheduler controller starts with it.
	if err := framework.InstallSecondarySchedulerCRD(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	var loads []stack.NodeLoad
	for _, p := range pools {
		for _, n := range []stack.NodeLoad{{Name: p + "-hot", CPU: 20, Memory: 20}, {Name: p + "-cold", CPU: 10, Memory: 20}} {
			if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: "8", Memory: "16Gi", Pods: 110, Labels: map[string]string{poolLabel: p}}); err != nil {
				t.Fatal(err)
			}
			loads = append(loads, n)
		}
	}
	st, err := stack.Start(ctx, c, stack.Options{Prefix: "rebal-", Nodes: loads, SampleInterval: 500 * time.Millisecond, ReportInterval: time.Second,
		WatcherArgs: []string{"--stale-after=4s"}})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-rebalancer-e2e",
		Config: stack.TLPConfig(schedulerName, st.Watcher.URL, 40, 30, 1)})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{c: c, st: st, sched: sched}
	e.startOperator(ctx, t, "berth-operator-rebalancer")
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = berthv1alpha1.AddToScheme(scheme)
	if e.cl, err = client.New(c.RESTConfig, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return e
}

// startOperator runs berth-operator with the rebalancer, its /metrics in plain HTTP on loopback.
func (e *env) startOperator(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	e.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	if e.op, err = framework.StartOperator(ctx, e.c, framework.OperatorOptions{Name: name, LeaderElection: true, LeaseID: "berth-operator-rebalancer-e2e",
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", port),
		Args:        []string{"--metrics-secure=false", "--rebalancer", "--rebalancer-protected-namespaces=berth-system"}}); err != nil {
		t.Fatal(err)
	}
}

// metric returns the value of the operator's series line starting with prefix (-1: none).
func (e *env) metric(ctx context.Context, t *testing.T, prefix string) float64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.metricsURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return -1
}

func i32(v int32) *int32 { return &v }

// rebalancer is a pool's policy: 5 s rounds, hot after 2 of them, one pod per owner per round.
func (e *env) rebalancer(ctx context.Context, t *testing.T, pool, watcher string, dryRun bool) {
	t.Helper()
	r := &berthv1alpha1.Rebalancer{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + pool}, Spec: berthv1alpha1.RebalancerSpec{
		WatcherAddress: watcher, SchedulerNames: []string{schedulerName},
		NodeSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{poolLabel: pool}},
		IntervalSeconds: 5, AnomalyRounds: 2, MetricsExpirySeconds: 20, DryRun: dryRun,
		LowThresholds:  berthv1alpha1.ResourceThresholds{CPU: i32(30)},
		HighThresholds: berthv1alpha1.ResourceThresholds{CPU: i32(80)},
		Limits:         berthv1alpha1.RebalancerLimits{PerNode: 2, PerNamespace: 5, PerOwner: 1, PerRound: 10, EvictionsPerSecond: 5, OwnerCooldownSeconds: 600},
		Victims:        berthv1alpha1.RebalancerVictims{MaxPriority: i32(999999999)},
	}}
	if err := e.cl.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.cl.Delete(context.Background(), r) })
}

// status waits until the pool's Rebalancer has run at least rounds rounds and ok holds.
func (e *env) status(ctx context.Context, t *testing.T, pool string, timeout time.Duration, ok func(*berthv1alpha1.RebalancerStatus) bool) *berthv1alpha1.RebalancerStatus {
	t.Helper()
	r := &berthv1alpha1.Rebalancer{}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := e.cl.Get(ctx, client.ObjectKey{Name: "e2e-" + pool}, r); err != nil {
			return false, nil
		}
		return ok(&r.Status), nil
	})
	if err != nil {
		t.Fatalf("Rebalancer e2e-%s: %v; status %+v lastRound %+v\noperator log:\n%s", pool, err, r.Status.Conditions, r.Status.LastRound, e.op.Tail(30))
	}
	return &r.Status
}

func round(s *berthv1alpha1.RebalancerStatus) int64 {
	if s.LastRound == nil {
		return 0
	}
	return s.LastRound.Round
}

// workload places replicas 1-CPU pods of berth-scheduler on the pool's hot node: the cold node
// is cordoned while they are placed (the load shifts afterwards, as in production), then the
// hot node's load is raised to 95 %.
func (e *env) workload(ctx context.Context, t *testing.T, pool, ns string, replicas int32) []corev1.Pod {
	t.Helper()
	if err := framework.EnsureNamespace(ctx, e.c.Client, ns); err != nil {
		t.Fatal(err)
	}
	cold := pool + "-cold"
	e.cordon(ctx, t, cold, true)
	spec := framework.PodSpec(schedulerName, "1", "256Mi")
	spec.NodeSelector = map[string]string{poolLabel: pool}
	spec.Tolerations = e.tolerations(ctx, t, pool+"-hot")
	d := framework.Deployment(ns, "web", replicas, spec)
	if _, err := e.c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := framework.WaitPods(ctx, e.c.Client, ns, "app=web", int(replicas), 2*time.Minute, framework.Running)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != pool+"-hot" {
			t.Fatalf("pod %s on %s, want %s-hot", p.Name, p.Spec.NodeName, pool)
		}
	}
	e.cordon(ctx, t, cold, false)
	if err := e.st.Agents[pool+"-hot"].Fixture.Set(95, 20); err != nil {
		t.Fatal(err)
	}
	return pods
}

// tolerations tolerate the taints the local cluster puts on its simulated nodes (read from
// node), by key: not everything, so a cordoned node still refuses the pods.
func (e *env) tolerations(ctx context.Context, t *testing.T, node string) []corev1.Toleration {
	t.Helper()
	n, err := e.c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Toleration
	for _, taint := range n.Spec.Taints {
		if taint.Key != corev1.TaintNodeUnschedulable {
			out = append(out, corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: taint.Effect})
		}
	}
	return out
}

func (e *env) cordon(ctx context.Context, t *testing.T, node string, on bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := e.c.Client.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// stockPod is a ReplicaSet's pod of the default scheduler on the hot node.
func (e *env) stockPod(ctx context.Context, t *testing.T, pool, ns string) corev1.Pod {
	t.Helper()
	spec := framework.PodSpec("default-scheduler", "500m", "128Mi")
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": pool + "-hot"}
	spec.Tolerations = e.tolerations(ctx, t, pool+"-hot")
	labels := map[string]string{"app": "stock"}
	n := int32(1)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stock"}, Spec: appsv1.ReplicaSetSpec{Replicas: &n,
		Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	if _, err := e.c.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := framework.WaitPods(ctx, e.c.Client, ns, "app=stock", 1, 2*time.Minute, framework.Running)
	if err != nil {
		t.Fatal(err)
	}
	return pods[0]
}

// events returns the rebalancer's Events in ns by reason.
func (e *env) events(ctx context.Context, t *testing.T, ns string) map[string][]corev1.Event {
	t.Helper()
	list, err := e.c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]corev1.Event{}
	for _, ev := range list.Items {
		if strings.HasPrefix(ev.Reason, "Rebalancer") {
			out[ev.Reason] = append(out[ev.Reason], ev)
		}
	}
	return out
}

func TestRebalancer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	e := setup(ctx, t)

	t.Run("a hot node is relieved; the default scheduler's pod is left alone", func(t *testing.T) {
		const pool, ns = "relief", "rebal-relief"
		pods := e.workload(ctx, t, pool, ns, 3)
		stock := e.stockPod(ctx, t, pool, ns)
		e.rebalancer(ctx, t, pool, e.st.Watcher.URL, false)
		// The move is recorded in status.moves before the eviction is asked for, and stays there
		// for the owner's cooldown.
		s := e.status(ctx, t, pool, 2*time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool { return len(s.Moves) > 0 })
		acted := s.Moves[0].Round
		if m := s.Moves[0]; len(s.Moves) != 1 || m.From != pool+"-hot" || !strings.HasPrefix(m.Owner, "ReplicaSet/web-") || m.DryRun {
			t.Errorf("moves %+v", s.Moves)
		}
		if s.LastRound.HotNodes != 1 || s.LastRound.ColdNodes != 1 || !meta.IsStatusConditionTrue(s.Conditions, berthv1alpha1.RebalancerConditionActive) {
			t.Errorf("acting round: %+v conditions %+v", s.LastRound, s.Conditions)
		}
		// One owner, perOwner 1, then the owner's cooldown: exactly one pod moves, in this and
		// the next rounds, though the fixture keeps the node at 95 %.
		e.status(ctx, t, pool, time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool { return round(s) >= acted+3 })
		evs := e.events(ctx, t, ns)
		if len(evs[rb.EventMoved]) != 1 {
			t.Fatalf("moved events %d, want 1 (%v)", len(evs[rb.EventMoved]), evs)
		}
		moved := evs[rb.EventMoved][0]
		for _, want := range []string{"node relief-hot cpu at 95%", "above the high threshold 80%", fmt.Sprintf("round %d", acted), "requests"} {
			if !strings.Contains(moved.Message, want) {
				t.Errorf("event %q does not say %q", moved.Message, want)
			}
		}
		var evicted string
		for _, p := range pods {
			if p.Name == moved.InvolvedObject.Name {
				evicted = p.Name
			}
		}
		if evicted == "" {
			t.Fatalf("event about %s, not one of the workload's pods", moved.InvolvedObject.Name)
		}
		// The replacement is placed by berth-scheduler on measured load: on the cold node.
		now, err := framework.WaitPods(ctx, e.c.Client, ns, "app=web", 3, time.Minute, func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && p.Name != evicted
		})
		if err != nil {
			t.Fatal(err)
		}
		perNode := map[string]int{}
		for _, p := range now {
			perNode[p.Spec.NodeName]++
		}
		if perNode[pool+"-cold"] != 1 || perNode[pool+"-hot"] != 2 {
			t.Errorf("after the move: %v, want 1 pod on the cold node", perNode)
		}
		got := &corev1.Pod{}
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: stock.Name}, got); err != nil || got.UID != stock.UID || got.DeletionTimestamp != nil {
			t.Errorf("the default scheduler's pod was touched: %v %+v", err, got.ObjectMeta)
		}
		nodeEvents, err := e.c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + pool + "-hot"})
		if err != nil {
			t.Fatal(err)
		}
		var relieving int
		for _, ev := range nodeEvents.Items {
			if ev.Reason == rb.EventNodeRelieve && strings.Contains(ev.Message, evicted) {
				relieving++
			}
		}
		if relieving != 1 {
			t.Errorf("%d node events naming %s, want 1", relieving, evicted)
		}
		// kubectl berth explain says why the (gone) pod was moved.
		out := explain(ctx, t, e, ns, evicted)
		if !strings.Contains(out, "rebalancer:") || !strings.Contains(out, rb.EventMoved) || !strings.Contains(out, "above the high threshold 80%") {
			t.Errorf("kubectl berth explain does not say why %s moved:\n%s", evicted, out)
		}
		for series, want := range map[string]float64{
			`berth_rebalancer_evictions_total{rebalancer="e2e-relief",result="evicted"}`: 1,
			`berth_rebalancer_nodes{class="hot",rebalancer="e2e-relief"}`:                1,
			`berth_rebalancer_nodes{class="cold",rebalancer="e2e-relief"}`:               1,
		} {
			if got := e.metric(ctx, t, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
		if got := e.metric(ctx, t, `berth_rebalancer_skips_total{reason="owner_cooldown",rebalancer="e2e-relief"}`); got < 1 {
			t.Errorf("owner_cooldown skips %v, want some", got)
		}
		if got := e.metric(ctx, t, `berth_rebalancer_skips_total{reason="other_scheduler",rebalancer="e2e-relief"}`); got < 1 {
			t.Errorf("other_scheduler skips %v, want some (the stock pod)", got)
		}

		// The operator crashes (SIGKILL) and another takes over: it reads the moves from the
		// status, so the same owner is not moved again although the node stays at 95 %.
		e.op.Kill()
		e.startOperator(ctx, t, "berth-operator-rebalancer-2")
		before := round(e.status(ctx, t, pool, time.Minute, func(*berthv1alpha1.RebalancerStatus) bool { return true }))
		s = e.status(ctx, t, pool, 2*time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool { return round(s) >= before+4 })
		if n := len(e.events(ctx, t, ns)[rb.EventMoved]); n != 1 || len(s.Moves) != 1 {
			t.Errorf("after the restart: %d moved events, moves %+v; want the one move only", n, s.Moves)
		}
	})

	t.Run("a PodDisruptionBudget blocks the eviction", func(t *testing.T) {
		const pool, ns = "pdb", "rebal-pdb"
		pods := e.workload(ctx, t, pool, ns, 2)
		minAvail := intstr.FromInt32(2)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvail, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		if _, err := e.c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The disruption controller must have counted the pods before a refusal means anything.
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := e.c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
			return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 2, nil
		}); err != nil {
			t.Fatal(err)
		}
		e.rebalancer(ctx, t, pool, e.st.Watcher.URL, false)
		s := e.status(ctx, t, pool, 2*time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool { return s.LastRound != nil && s.LastRound.Refused > 0 })
		if s.LastRound.Evictions != 0 || len(s.Moves) != 0 {
			t.Errorf("refused round: %+v moves %v", s.LastRound, s.Moves)
		}
		assertUnchanged(ctx, t, e, ns, pods)
		if evs := e.events(ctx, t, ns); len(evs[rb.EventPDBRefused]) == 0 || len(evs[rb.EventMoved]) != 0 {
			t.Errorf("events %v", evs)
		}
	})

	t.Run("dry run decides and evicts nothing", func(t *testing.T) {
		const pool, ns = "dryrun", "rebal-dryrun"
		pods := e.workload(ctx, t, pool, ns, 3)
		e.rebalancer(ctx, t, pool, e.st.Watcher.URL, true)
		s := e.status(ctx, t, pool, 2*time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool { return s.LastRound != nil && s.LastRound.Evictions > 0 })
		acted := s.LastRound.Round
		if !s.LastRound.DryRun || len(s.Moves) != 0 || meta.IsStatusConditionTrue(s.Conditions, berthv1alpha1.RebalancerConditionActive) {
			t.Errorf("dry-run round: %+v moves %v conditions %+v", s.LastRound, s.Moves, s.Conditions)
		}
		e.status(ctx, t, pool, time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool { return round(s) >= acted+2 })
		assertUnchanged(ctx, t, e, ns, pods)
		evs := e.events(ctx, t, ns)
		if len(evs[rb.EventWouldMove]) == 0 || len(evs[rb.EventMoved]) != 0 {
			t.Errorf("events %v", evs)
		}
	})

	t.Run("a stale watcher freezes action", func(t *testing.T) {
		const pool, ns = "stale", "rebal-stale"
		// A watcher of its own, so stopping it leaves the other pools alone.
		w, err := stack.StartWatcher(ctx, e.c, "rebal-stale-watcher", kubeconfigOf(t, e), "--source=agent",
			"--agent-service-account="+stack.AgentNamespace+"/"+stack.AgentServiceAccount, "--stale-after=4s")
		if err != nil {
			t.Fatal(err)
		}
		// Its own agent for the hot node reports there too.
		a, err := stack.StartAgent(ctx, e.c, stack.AgentOptions{Name: "rebal-stale-agent", Load: stack.NodeLoad{Name: pool + "-hot", CPU: 95, Memory: 20},
			Dir: filepath.Join(e.c.Dir, "rebal-stale"), WatcherURL: w.URL, Token: token(ctx, t, e, pool+"-hot"), SampleInterval: 500 * time.Millisecond, ReportInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b, err := stack.StartAgent(ctx, e.c, stack.AgentOptions{Name: "rebal-stale-agent-cold", Load: stack.NodeLoad{Name: pool + "-cold", CPU: 10, Memory: 20},
			Dir: filepath.Join(e.c.Dir, "rebal-stale"), WatcherURL: w.URL, Token: token(ctx, t, e, pool+"-cold"), SampleInterval: 500 * time.Millisecond, ReportInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stack.WaitFresh(ctx, w.URL, []string{pool + "-hot", pool + "-cold"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		// The pods land while the shared pipeline shows the hot node idle, then it turns hot.
		pods := e.workload(ctx, t, pool, ns, 2)
		// The hot node's agent stops: its sample ages past the watcher's stale-after, so the
		// node is neither hot nor cold, and nothing moves.
		a.Stop(e.c)
		e.rebalancer(ctx, t, pool, w.URL, false)
		s := e.status(ctx, t, pool, time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool { return round(s) >= 3 })
		if s.LastRound.HotNodes != 0 || s.LastRound.Unknown != 1 || s.LastRound.Evictions != 0 {
			t.Errorf("stale node round: %+v", s.LastRound)
		}
		// Then the whole watcher goes away: the condition says so, and still nothing moves.
		b.Stop(e.c)
		e.c.StopComponent(w.Process)
		s = e.status(ctx, t, pool, time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool {
			c := meta.FindStatusCondition(s.Conditions, berthv1alpha1.RebalancerConditionMetrics)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "WatcherTransport"
		})
		if c := meta.FindStatusCondition(s.Conditions, berthv1alpha1.RebalancerConditionActive); c == nil || c.Reason != rb.ReasonNoMetrics {
			t.Errorf("Active condition %+v", c)
		}
		assertUnchanged(ctx, t, e, ns, pods)
		if evs := e.events(ctx, t, ns); len(evs) != 0 {
			t.Errorf("events with a stale watcher: %v", evs)
		}
	})

	t.Run("a watcher answering garbage: no action, a metric", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"timestamp": "yesterday", "data": [1, 2`))
		}))
		defer srv.Close()
		r := &berthv1alpha1.Rebalancer{ObjectMeta: metav1.ObjectMeta{Name: "e2e-garbage"}, Spec: berthv1alpha1.RebalancerSpec{
			WatcherAddress: srv.URL, SchedulerNames: []string{schedulerName}, IntervalSeconds: 5,
			NodeSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{poolLabel: "relief"}},
			LowThresholds: berthv1alpha1.ResourceThresholds{CPU: i32(30)}, HighThresholds: berthv1alpha1.ResourceThresholds{CPU: i32(80)}}}
		if err := e.cl.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.cl.Delete(context.Background(), r) }()
		s := e.status(ctx, t, "garbage", time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool { return round(s) >= 2 })
		if c := meta.FindStatusCondition(s.Conditions, berthv1alpha1.RebalancerConditionMetrics); c == nil || c.Reason != "WatcherDecode" || s.LastRound.Evictions != 0 {
			t.Errorf("conditions %+v round %+v", s.Conditions, s.LastRound)
		}
		if got := e.metric(ctx, t, `berth_rebalancer_watcher_errors_total{kind="decode",rebalancer="e2e-garbage"}`); got < 2 {
			t.Errorf("decode errors %v, want one per round", got)
		}
	})

	t.Run("a node selector matching nothing: a condition, no action", func(t *testing.T) {
		e.rebalancer(ctx, t, "nowhere", e.st.Watcher.URL, false)
		s := e.status(ctx, t, "nowhere", time.Minute, func(s *berthv1alpha1.RebalancerStatus) bool { return round(s) >= 1 })
		c := meta.FindStatusCondition(s.Conditions, berthv1alpha1.RebalancerConditionActive)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != rb.ReasonNoNodes || s.LastRound.Nodes != 0 || s.LastRound.Evictions != 0 {
			t.Errorf("Active %+v, round %+v", c, s.LastRound)
		}
	})

	t.Run("thresholds are refused at the API, naming the field", func(t *testing.T) {
		for _, tc := range []struct {
			low, high int32
			want      string
		}{{90, 80, "spec.lowThresholds.cpu"}, {10, 101, "spec.highThresholds.cpu"}} {
			r := &berthv1alpha1.Rebalancer{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: berthv1alpha1.RebalancerSpec{WatcherAddress: "http://127.0.0.1:1",
				LowThresholds: berthv1alpha1.ResourceThresholds{CPU: i32(tc.low)}, HighThresholds: berthv1alpha1.ResourceThresholds{CPU: i32(tc.high)}}}
			err := e.cl.Create(ctx, r)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("low %d high %d: %v, want Invalid naming %s", tc.low, tc.high, err, tc.want)
			}
		}
	})
}

func assertUnchanged(ctx context.Context, t *testing.T, e *env, ns string, before []corev1.Pod) {
	t.Helper()
	for _, p := range before {
		got, err := e.c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || got.UID != p.UID || got.DeletionTimestamp != nil {
			t.Errorf("pod %s changed: %v", p.Name, err)
		}
	}
}

// kubeconfigOf is the load watcher's own kubeconfig (written by the shared stack).
func kubeconfigOf(t *testing.T, e *env) string {
	t.Helper()
	kc, err := stack.WatcherKubeconfig(context.Background(), e.c, "rebal-stale-watcher", stack.AgentNamespace)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// token mints a token bound to the node's agent pod of the shared stack.
func token(ctx context.Context, t *testing.T, e *env, node string) string {
	t.Helper()
	tok, err := stack.MintToken(ctx, e.c, stack.AgentServiceAccount, e.st.AgentPods[node])
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// explain runs kubectl-berth explain pod against berth-scheduler and returns what it printed.
func explain(ctx context.Context, t *testing.T, e *env, ns, pod string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(e.c.BinDir, "kubectl-berth"), "explain", "pod", pod, "-n", ns, "--kubeconfig="+e.c.Kubeconfig,
		fmt.Sprintf("--scheduler-url=https://127.0.0.1:%d", e.sched.Port), "--insecure-skip-tls-verify", "--request-timeout=20s")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // the scheduler may no longer hold a record of a deleted pod; the move is printed first
	return out.String()
}
