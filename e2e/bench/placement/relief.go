package placement

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// The load-shift phase (`make bench-placement`, after the placement runs; PLACEMENT_RELIEF=0 skips
// it; cmd/reliefbench alone): does hot-spot relief pay off after placement? One local cluster with
// a pool of simulated 4-CPU nodes, one real berth-agent process per node on a fixture /proc,
// berth-loadwatcher, berth-scheduler (TargetLoadPacking 40 %) and berth-operator with --rebalancer.
// A seeded workload of single-replica ReplicaSets (1 CPU requested, using 30 % of it) is placed by
// berth-scheduler while the last Cold nodes are cordoned (capacity that arrives after placement, as
// when an autoscaler adds nodes); then a seeded 25 % of them raise their use to 100–150 % of the
// request. The seed is placed once, then measured in three windows (relief off, dry-run, on), each
// on that placement from cool nodes: a new Rebalancer is created just before the shift (none when
// off), the window is measured from the shift, and the load shifts back before the next one. So
// the rounds the rebalancer needs to see the hot nodes (its detection delay, printed) count
// against it, and every window starts from the same state. Every figure is read back from the running system: node CPU from the watcher's
// answers, moves and refusals from the rebalancer's Events, pods from the API server. The agents
// read each pod's use from the cgroups the simulator writes (--cgroup-root), so the rebalancer
// works on measured per-pod use, as it does where the agents run with the host's cgroups.

// ReliefOptions size the load-shift phase.
type ReliefOptions struct {
	Seed uint64
	// Nodes of 4 CPU; Workloads single-replica ReplicaSets of 1 CPU (default 16 and 40); Cold of the
	// nodes are cordoned while the workloads are placed (default 6).
	Nodes, Workloads, Cold int
	// Shift is the share of workloads whose use rises after placement (default 0.25).
	Shift float64
	// Interval is the rebalancer's round (default 5 s; a real cluster's 60 s compressed), and
	// Observe how long each mode is measured (default 12 rounds).
	Interval, Observe time.Duration
	// High and Low are the CPU thresholds (default 80 and 30).
	High, Low int32
	Dir       string
	Logf      func(string, ...any)
}

func (o *ReliefOptions) defaults() {
	if o.Nodes == 0 {
		o.Nodes = 16
	}
	if o.Workloads == 0 {
		o.Workloads = 40
	}
	if o.Cold == 0 {
		o.Cold = 6
	}
	if o.Shift == 0 {
		o.Shift = 0.25
	}
	if o.Interval == 0 {
		o.Interval = 5 * time.Second
	}
	if o.Observe == 0 {
		o.Observe = 12 * o.Interval
	}
	if o.High == 0 {
		o.High = 80
	}
	if o.Low == 0 {
		o.Low = 30
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

const (
	reliefScheduler = "berth-relief"
	reliefBaseCPU   = 5.0
	reliefNodeMilli = 4000
	reliefPodMilli  = 1000
	// reliefStock is how many default-scheduler ReplicaSets sit among them (must stay untouched).
	reliefStock = 4
)

// ReliefRow is one mode's figures.
type ReliefRow struct {
	Mode string
	// HotNodeSeconds: node-seconds above High in the watcher's served Latest CPU, polled every
	// second; MaxUtil the largest served value.
	HotNodeSeconds, MaxUtil float64
	// Evictions accepted (dry-run: dry-run evictions the API server accepted).
	Evictions, MovedTwice, PDBRefused, PendingAfterMove, NonBerthTouched int
	// MaxPerNodeRound is the most evictions from one node in one round.
	MaxPerNodeRound int
	// FirstRound is the first acting round's decisions ("pod from node"), from the Events.
	FirstRound []string
	// DetectDelay is from the load shift to the rebalancer's first decision Event (-1: none;
	// Events carry whole seconds, so it is rounded down to one).
	DetectDelay time.Duration
	Notes       []string
}

// ReliefResult is the phase's table.
type ReliefResult struct {
	Options ReliefOptions
	Rows    []*ReliefRow
}

// workload is one seeded ReplicaSet: its use in percent of its request before and after the shift.
type workload struct {
	name          string
	before, after float64
	pdb           bool
}

func reliefWorkloads(o ReliefOptions) []workload {
	rng := rand.New(rand.NewPCG(o.Seed, 23))
	ws := make([]workload, o.Workloads)
	for i := range ws {
		ws[i] = workload{name: fmt.Sprintf("w-%02d", i), before: 30, after: 30}
	}
	perm := rng.Perm(len(ws))
	shifted := int(float64(len(ws))*o.Shift + 0.5)
	for _, i := range perm[:shifted] {
		ws[i].after = 100 + 50*rng.Float64() // some up to 150 % of the request
	}
	// A few workloads carry a PodDisruptionBudget that allows no eviction of their only pod.
	for _, i := range perm[len(perm)-max(1, len(ws)/10):] {
		ws[i].pdb = true
	}
	return ws
}

// ExecuteRelief runs the load-shift phase: one placement, then three windows (relief off,
// dry-run, on), each measured from the moment the load shifts with a Rebalancer created just
// before it (a fresh state: no round has seen the hot nodes yet), so the rebalancer's detection
// delay counts against it as it would in a cluster.
func ExecuteRelief(ctx context.Context, o ReliefOptions) (*ReliefResult, error) {
	o.defaults()
	c, err := cluster.Start(ctx, cluster.Config{Dir: o.Dir, WithoutBerthCRDs: true, Logf: o.Logf})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	r, err := startRelief(ctx, c, o)
	if err != nil {
		return nil, err
	}
	ns := "relief"
	stop, err := r.place(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer stop()
	res := &ReliefResult{Options: o}
	for _, mode := range []string{"off", "dry-run", "on"} {
		row, err := r.window(ctx, ns, mode)
		if row != nil {
			res.Rows = append(res.Rows, row)
		}
		if err != nil {
			return res, fmt.Errorf("relief %s: %w", mode, err)
		}
	}
	stop()
	return res, r.clear(ctx, ns)
}

// startRelief installs the CRDs, creates the node pool and starts the agents, the load watcher,
// berth-scheduler and berth-operator with the rebalancer.
func startRelief(ctx context.Context, c *cluster.Cluster, o ReliefOptions) (*reliefRun, error) {
	for _, f := range []string{"berth.dev_rebalancers.yaml", crds.SecondarySchedulerFile} {
		crd, err := crds.Load(f)
		if err != nil {
			return nil, err
		}
		if err := cluster.InstallCRDs(ctx, c.RESTConfig, crd); err != nil {
			return nil, err
		}
	}
	var loads []stack.NodeLoad
	for i := 0; i < o.Nodes; i++ {
		n := stack.NodeLoad{Name: fmt.Sprintf("relief-%02d", i), CPU: reliefBaseCPU, Memory: 20}
		if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: "4", Memory: "16Gi", Pods: 110, Labels: map[string]string{"berth.dev/bench-pool": "relief"}}); err != nil {
			return nil, err
		}
		loads = append(loads, n)
	}
	o.Logf("relief: starting %d agents, the load watcher, berth-scheduler and berth-operator", o.Nodes)
	st, err := reliefStack(ctx, c, loads)
	if err != nil {
		return nil, err
	}
	if _, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-relief", Config: stack.TLPConfig(reliefScheduler, st.Watcher.URL, 40, 30, 1)}); err != nil {
		return nil, err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	if _, err := framework.StartOperator(ctx, c, framework.OperatorOptions{Name: "berth-operator-relief", MetricsAddr: fmt.Sprintf("127.0.0.1:%d", port),
		Args: []string{"--metrics-secure=false", "--rebalancer", "--rebalancer-protected-namespaces=berth-system"}}); err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	_ = berthv1alpha1.AddToScheme(scheme)
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &reliefRun{c: c, st: st, cl: cl, o: o, ws: reliefWorkloads(o), metricsURL: metricsURL}, nil
}

// rebalancer is the window's Rebalancer, named after the mode so no state of an earlier
// window's object carries over.
func (r *reliefRun) rebalancer(mode string) *berthv1alpha1.Rebalancer {
	o := r.o
	return &berthv1alpha1.Rebalancer{ObjectMeta: metav1.ObjectMeta{Name: "relief-" + mode}, Spec: berthv1alpha1.RebalancerSpec{
		WatcherAddress: r.st.Watcher.URL, SchedulerNames: []string{reliefScheduler}, DryRun: mode == "dry-run",
		NodeSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"berth.dev/bench-pool": "relief"}},
		IntervalSeconds: int32(o.Interval / time.Second), AnomalyRounds: 2, MetricsExpirySeconds: 30,
		LowThresholds: berthv1alpha1.ResourceThresholds{CPU: &o.Low}, HighThresholds: berthv1alpha1.ResourceThresholds{CPU: &o.High},
		Limits: berthv1alpha1.RebalancerLimits{PerNode: 2, PerNamespace: 10, PerOwner: 1, PerRound: 10, EvictionsPerSecond: 10,
			OwnerCooldownSeconds: int32(o.Observe/time.Second) * 4},
	}}
}

// window measures one mode on the placement: the mode's Rebalancer is created (none when off),
// the load shifts and is measured from that moment; then the Rebalancer is deleted, the load
// shifts back and the window waits until no node is hot, so the next window starts from the
// same placement and the same cool nodes. "on" comes last: it is the only mode that moves pods.
func (r *reliefRun) window(ctx context.Context, ns, mode string) (*ReliefRow, error) {
	reason := map[string]string{"dry-run": rbEventWouldMove, "on": rbEventMoved}[mode]
	var rb *berthv1alpha1.Rebalancer
	if mode != "off" {
		rb = r.rebalancer(mode)
		if err := r.cl.Create(ctx, rb); err != nil {
			return nil, err
		}
		defer func() { _ = r.cl.Delete(context.Background(), rb) }()
	}
	r.setShift(true)
	row := &ReliefRow{Mode: mode, DetectDelay: -1}
	r.observe(ctx, row, ns, reason, time.Now())
	if rb != nil {
		if err := r.cl.Get(ctx, client.ObjectKeyFromObject(rb), rb); err == nil && rb.Status.LastRound != nil {
			row.Notes = append(row.Notes, fmt.Sprintf("Rebalancer status: round %d, pod use from %s, %d moves in cooldown", rb.Status.LastRound.Round, rb.Status.LastRound.Usage, len(rb.Status.Moves)))
		}
		if err := r.cl.Delete(ctx, rb); err != nil {
			return row, err
		}
	}
	if mode == "on" {
		series := `berth_rebalancer_evictions_total{rebalancer="relief-on",result="evicted"}`
		if v := reliefMetric(ctx, r.metricsURL, series); v >= 0 && int(v) != row.Evictions {
			row.Notes = append(row.Notes, fmt.Sprintf("operator metric says %v evictions, Events %d", v, row.Evictions))
		}
	}
	r.setShift(false)
	return row, r.cool(ctx)
}

// cool waits until the watcher serves no node above High in three answers in a row.
func (r *reliefRun) cool(ctx context.Context) error {
	calm := 0
	return wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := stack.GetWatcher(ctx, r.st.Watcher.URL)
		if err != nil {
			calm = 0
			return false, nil
		}
		for _, n := range r.st.Opts.Nodes {
			if v, ok := reliefLatestCPU(resp, n.Name); ok && v > float64(r.o.High) {
				calm = 0
				return false, nil
			}
		}
		calm++
		return calm >= 3, nil
	})
}

// Event reasons of pkg/rebalancer (kept as strings: the bench reads what the system wrote).
const (
	rbEventMoved     = "RebalancerMoved"
	rbEventWouldMove = "RebalancerWouldMove"
	rbEventRefused   = "RebalancerPDBRefused"
)

type reliefRun struct {
	c          *cluster.Cluster
	st         *stack.Stack
	cl         client.Client
	o          ReliefOptions
	ws         []workload
	metricsURL string

	mu      sync.Mutex
	shifted bool
}

func (r *reliefRun) use(w *workload) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shifted {
		return w.after
	}
	return w.before
}

// setShift raises the shifted workloads' use (true) or puts it back.
func (r *reliefRun) setShift(on bool) {
	r.mu.Lock()
	r.shifted = on
	r.mu.Unlock()
	r.o.Logf("relief: load shifted: %t", on)
}

// place creates the workloads in waves (so each wave sees the previous one reported), runs the
// simulator (node load = base + the use of the pods the API server says run there, owner by
// owner, so a moved pod's replacement carries its use) and waits until every pod runs.
func (r *reliefRun) place(ctx context.Context, ns string) (stop func(), err error) {
	r.mu.Lock()
	r.shifted = false
	r.mu.Unlock()
	if err := framework.EnsureNamespace(ctx, r.c.Client, ns); err != nil {
		return nil, err
	}
	simCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.simulate(simCtx, ns) }()
	stop = func() { cancel(); <-done }
	tol := r.tolerations(ctx)
	cordoned := r.st.Opts.Nodes[len(r.st.Opts.Nodes)-r.o.Cold:]
	cordon := func(on bool) error {
		for _, n := range cordoned {
			patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
			if _, err := r.c.Client.CoreV1().Nodes().Patch(ctx, n.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := cordon(true); err != nil {
		stop()
		return nil, err
	}
	one := int32(1)
	rs := func(name, scheduler, cpu string, labels map[string]string) *appsv1.ReplicaSet {
		spec := framework.PodSpec(scheduler, cpu, "512Mi")
		spec.NodeSelector = map[string]string{"berth.dev/bench-pool": "relief"}
		spec.Tolerations = tol
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.ReplicaSetSpec{Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	}
	for i := 0; i < reliefStock; i++ {
		name := fmt.Sprintf("stock-%d", i)
		// No requests: they fit beside the workloads on full nodes, hot ones included.
		if _, err := r.c.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs(name, corev1.DefaultSchedulerName, "", map[string]string{"app": "relief", "workload": name, "stock": "true"}), metav1.CreateOptions{}); err != nil {
			stop()
			return nil, err
		}
	}
	minAvail := intstr.FromInt32(1)
	for i, w := range r.ws {
		labels := map[string]string{"app": "relief", "workload": w.name}
		if _, err := r.c.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs(w.name, reliefScheduler, strconv.Itoa(reliefPodMilli)+"m", labels), metav1.CreateOptions{}); err != nil {
			stop()
			return nil, err
		}
		if w.pdb {
			pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.name},
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvail, Selector: &metav1.LabelSelector{MatchLabels: labels}}}
			if _, err := r.c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
				stop()
				return nil, err
			}
		}
		if (i+1)%4 == 0 {
			time.Sleep(3 * time.Second)
		}
	}
	if _, err := framework.WaitPods(ctx, r.c.Client, ns, "app=relief", len(r.ws)+reliefStock, 3*time.Minute, framework.Running); err != nil {
		stop()
		return nil, err
	}
	if err := cordon(false); err != nil {
		stop()
		return nil, err
	}
	time.Sleep(3 * time.Second) // the last wave reported
	r.o.Logf("relief: %s placed", ns)
	return stop, nil
}

func (r *reliefRun) tolerations(ctx context.Context) []corev1.Toleration {
	n, err := r.c.Client.CoreV1().Nodes().Get(ctx, r.st.Opts.Nodes[0].Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var out []corev1.Toleration
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnschedulable {
			continue
		}
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpExists, Effect: t.Effect})
	}
	return out
}

func (r *reliefRun) simulate(ctx context.Context, ns string) {
	byName := map[string]*workload{}
	for i := range r.ws {
		byName[r.ws[i].name] = &r.ws[i]
	}
	last := map[string]float64{}
	lastPods := map[string]string{}
	for {
		pods, err := r.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			load := map[string]float64{}
			perPod := map[string][]fixture.Pod{}
			for _, n := range r.st.Opts.Nodes {
				load[n.Name] = reliefBaseCPU
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
					continue
				}
				if w := byName[p.Labels["workload"]]; w != nil {
					share := r.use(w) / 100 * reliefPodMilli / reliefNodeMilli * 100
					load[p.Spec.NodeName] += share
					perPod[p.Spec.NodeName] = append(perPod[p.Spec.NodeName], fixture.Pod{UID: string(p.UID), QOS: "burstable", CPU: min(share, 100), MemoryBytes: 256 << 20})
				}
			}
			for node, v := range load {
				v = min(v, 100)
				a := r.st.Agents[node]
				if a == nil {
					continue
				}
				if last[node] != v && a.Fixture.Set(v, 20) == nil {
					last[node] = v
				}
				// The pods' cgroups, from which the agent measures each pod's use.
				sort.Slice(perPod[node], func(i, j int) bool { return perPod[node][i].UID < perPod[node][j].UID })
				if k := fmt.Sprint(perPod[node]); lastPods[node] != k && a.Fixture.SetPods(perPod[node]) == nil {
					lastPods[node] = k
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// observe measures one mode for o.Observe from start (the shift): the watcher's served CPU every
// second, then the rebalancer's Events and the pods.
func (r *reliefRun) observe(ctx context.Context, row *ReliefRow, ns, reason string, start time.Time) {
	stockUIDs := map[string]string{}
	if pods, err := r.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "stock=true"}); err == nil {
		for _, p := range pods.Items {
			stockUIDs[p.Name] = string(p.UID)
		}
	}
	r.o.Logf("relief: measuring %s for %s from the shift", row.Mode, r.o.Observe)
	r.pollHot(ctx, row, start)
	movedOwners, err := r.tallyEvents(ctx, row, ns, reason, start)
	if err != nil {
		row.Notes = append(row.Notes, "events: "+err.Error())
		return
	}
	pods, err := r.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		row.Notes = append(row.Notes, "pods: "+err.Error())
		return
	}
	for _, p := range pods.Items {
		if p.Labels["stock"] == "true" {
			if uid, ok := stockUIDs[p.Name]; !ok || uid != string(p.UID) {
				row.NonBerthTouched++
			}
			continue
		}
		if movedOwners[p.Labels["workload"]] && p.Status.Phase == corev1.PodPending && reason == rbEventMoved {
			row.PendingAfterMove++
		}
	}
	if len(pods.Items) < len(stockUIDs) {
		row.NonBerthTouched += len(stockUIDs) - len(pods.Items)
	}
}

// pollHot reads the watcher every second until start + o.Observe: node-seconds above High and
// the largest served value.
func (r *reliefRun) pollHot(ctx context.Context, row *ReliefRow, start time.Time) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := start.Add(r.o.Observe)
	for time.Now().Before(end) {
		resp, err := stack.GetWatcher(ctx, r.st.Watcher.URL)
		if err != nil {
			row.Notes = append(row.Notes, "watcher poll failed: "+err.Error())
		} else {
			for _, n := range r.st.Opts.Nodes {
				v, ok := reliefLatestCPU(resp, n.Name)
				if !ok {
					continue
				}
				row.MaxUtil = max(row.MaxUtil, v)
				if v > float64(r.o.High) {
					row.HotNodeSeconds++
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// tallyEvents reads the window's decisions (Events of reason since start): evictions, owners
// moved twice, the busiest node of a round, the first round's decisions and the detection delay
// (start to the first decision); it returns the owners moved.
func (r *reliefRun) tallyEvents(ctx context.Context, row *ReliefRow, ns, reason string, start time.Time) (map[string]bool, error) {
	evs, err := r.c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	moved := map[string]int{} // owner → moves
	rounds := map[int][]string{}
	refused, seen, perNodeRound := map[string]bool{}, map[string]bool{}, map[string]int{}
	for _, e := range evs.Items {
		at := reliefEventTime(&e)
		if at.Before(start.Truncate(time.Second)) {
			continue
		}
		switch e.Reason {
		case reason:
			if d := at.Sub(start); row.DetectDelay < 0 || d < row.DetectDelay {
				row.DetectDelay = max(d, 0)
			}
			if seen[e.InvolvedObject.Name] {
				break // dry-run decides the same pod again every round
			}
			seen[e.InvolvedObject.Name] = true
			row.Evictions++
			moved[reliefOwner(e.InvolvedObject.Name)]++
			if n, ok := reliefRound(e.Message); ok {
				rounds[n] = append(rounds[n], e.InvolvedObject.Name+" from "+reliefFrom(e.Message))
				k := fmt.Sprintf("%d/%s", n, reliefFrom(e.Message))
				perNodeRound[k]++
				row.MaxPerNodeRound = max(row.MaxPerNodeRound, perNodeRound[k])
			}
		case rbEventRefused:
			refused[e.InvolvedObject.Name] = true
		}
	}
	row.PDBRefused = len(refused)
	movedOwners := map[string]bool{}
	for owner, n := range moved {
		movedOwners[owner] = true
		if n > 1 {
			row.MovedTwice++
		}
	}
	first := -1
	for n := range rounds {
		if first < 0 || n < first {
			first = n
		}
	}
	if first >= 0 {
		row.FirstRound = rounds[first]
		sort.Strings(row.FirstRound)
	}
	return movedOwners, nil
}

// reliefStack starts the load pipeline as stack.Start does (agent identity, one fake agent pod and
// pod-bound token per node, berth-loadwatcher with the agent source), but each berth-agent process
// also reads its pods' cgroups from the fixture (--cgroup-root), which the simulator writes: the
// rebalancer gets measured per-pod use.
func reliefStack(ctx context.Context, c *cluster.Cluster, nodes []stack.NodeLoad) (*stack.Stack, error) {
	ns, sa := stack.AgentNamespace, stack.AgentServiceAccount
	if err := stack.EnsureAgentIdentity(ctx, c, ns, sa); err != nil {
		return nil, err
	}
	kc, err := stack.WatcherKubeconfig(ctx, c, "relief-berth-loadwatcher", ns)
	if err != nil {
		return nil, err
	}
	w, err := stack.StartWatcher(ctx, c, "relief-berth-loadwatcher", kc, "--source=agent", "--agent-service-account="+ns+"/"+sa, "--stale-after=30s")
	if err != nil {
		return nil, err
	}
	st := &stack.Stack{Watcher: w, Agents: map[string]*stack.Agent{}, AgentPods: map[string]*corev1.Pod{}, Opts: stack.Options{Nodes: nodes}}
	for _, n := range nodes {
		name := "relief-berth-agent-" + n.Name
		pod, err := stack.AgentPod(ctx, c, ns, sa, name, n.Name)
		if err != nil {
			return nil, err
		}
		st.AgentPods[n.Name] = pod
		tok, err := stack.MintToken(ctx, c, sa, pod)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(c.Dir, "relief", n.Name)
		fx, err := fixture.New(filepath.Join(dir, "proc"), n.CPU, n.Memory)
		if err != nil {
			return nil, err
		}
		if err := fx.EnableCgroups(filepath.Join(dir, "cgroup")); err != nil {
			return nil, err
		}
		wctx, stopWriter := context.WithCancel(ctx)
		written := make(chan struct{})
		go func() { defer close(written); _ = fx.Run(wctx, 125*time.Millisecond) }()
		c.OnStop(func() { stopWriter(); <-written })
		kubeconfig, tokenFile := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "token")
		if err := stack.TokenKubeconfig(c, kubeconfig, tok); err != nil {
			return nil, err
		}
		if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
			return nil, err
		}
		port, err := cluster.FreePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p, err := c.StartComponent(ctx, cluster.ProcessSpec{Name: name, Binary: filepath.Join(c.BinDir, "berth-agent"), Args: []string{
			"--node-name=" + n.Name, "--proc-root=" + fx.Root, "--cgroup-root=" + fx.CgroupRoot(), "--watcher-url=" + w.URL,
			"--token-file=" + tokenFile, "--listen=" + addr, "--kubeconfig=" + kubeconfig, "--sample-interval=500ms", "--report-interval=1s",
		}}, cluster.HTTPCheck("http://"+addr+"/readyz"))
		if err != nil {
			return nil, err
		}
		st.Agents[n.Name] = &stack.Agent{Process: p, Node: n.Name, URL: "http://" + addr, Addr: addr, TokenFile: tokenFile, Fixture: fx}
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if _, err := stack.WaitFresh(ctx, w.URL, names, time.Minute); err != nil {
		return nil, err
	}
	return st, nil
}

// reliefLatestCPU is a node's served Latest CPU sample (what the rebalancer classifies by; the
// window average lags a shift by minutes).
func reliefLatestCPU(r *loadapi.Response, node string) (float64, bool) {
	for _, m := range r.Data.NodeMetricsMap[node].Metrics {
		if m.Type == "CPU" && m.Operator == "Latest" {
			return m.Value, true
		}
	}
	return 0, false
}

func reliefEventTime(e *corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// ownerOf maps a ReplicaSet pod's name (w-07-abcde) to its workload.
func reliefOwner(pod string) string {
	if i := strings.LastIndexByte(pod, '-'); i > 0 {
		return pod[:i]
	}
	return pod
}

func reliefRound(msg string) (int, bool) {
	var n int
	_, err := fmt.Sscanf(msg, "round %d:", &n)
	return n, err == nil
}

func reliefFrom(msg string) string {
	f := strings.Fields(msg)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "node" {
			return f[i+1]
		}
	}
	return "?"
}

// clear deletes a namespace's workloads and waits until its pods are gone (same cluster state
// for the next replay).
func (r *reliefRun) clear(ctx context.Context, ns string) error {
	if err := r.c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := r.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	})
}

// promValue reads one series from a plain-HTTP /metrics (-1: none).
func reliefMetric(ctx context.Context, url, series string) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, series+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, series)), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// Print writes the phase's table.
func (res *ReliefResult) Print(w io.Writer) {
	o := res.Options
	fmt.Fprintf(w, "\nLoad-shift phase: seed %d, %d nodes of 4 CPU (%d cordoned while placing), %d workloads of 1 CPU using 30 %% (+%d default-scheduler), %.0f %% shifted to 100-150 %% of request; rounds %s, high %d %%, low %d %%, %s per window, every window measured from the shift with a new Rebalancer\n",
		o.Seed, o.Nodes, o.Cold, o.Workloads, reliefStock, o.Shift*100, o.Interval, o.High, o.Low, o.Observe)
	fmt.Fprintf(w, "%-8s %12s %9s %13s %10s %15s %12s %12s %17s %18s\n", "relief", "node-s>high", "max util", "detect delay", "evictions", "max/node/round", "moved twice", "PDB refused", "pending after mv", "non-berth touched")
	for _, r := range res.Rows {
		delay := "–"
		if r.DetectDelay >= 0 && r.Mode != "off" {
			delay = r.DetectDelay.Round(time.Second).String()
		}
		fmt.Fprintf(w, "%-8s %12.0f %8.1f%% %13s %10d %15d %12d %12d %17d %18d\n", r.Mode, r.HotNodeSeconds, r.MaxUtil, delay, r.Evictions, r.MaxPerNodeRound, r.MovedTwice, r.PDBRefused, r.PendingAfterMove, r.NonBerthTouched)
	}
	byMode := map[string]*ReliefRow{}
	for _, r := range res.Rows {
		byMode[r.Mode] = r
	}
	if off, on := byMode["off"], byMode["on"]; off != nil && on != nil && off.HotNodeSeconds > 0 {
		fmt.Fprintf(w, "relief on vs off: node-seconds above %d %% cut by %.0f %%", o.High, 100*(1-on.HotNodeSeconds/off.HotNodeSeconds))
		if dry := byMode["dry-run"]; dry != nil && dry.HotNodeSeconds > 0 {
			fmt.Fprintf(w, "; vs dry-run: cut by %.0f %%", 100*(1-on.HotNodeSeconds/dry.HotNodeSeconds))
		}
		fmt.Fprintln(w)
	}
	if dry, on := byMode["dry-run"], byMode["on"]; dry != nil && on != nil {
		same := strings.Join(dry.FirstRound, ", ") == strings.Join(on.FirstRound, ", ")
		fmt.Fprintf(w, "first-round decisions on the same placement: dry-run [%s], on [%s]: same=%t\n", strings.Join(dry.FirstRound, ", "), strings.Join(on.FirstRound, ", "), same)
	}
	fmt.Fprintln(w, "dry-run evictions: pods the API server accepted a dryRun=All eviction for (nothing was evicted); node-s>high: node-seconds the watcher served a Latest CPU above high; detect delay: shift to the first decision Event")
	for _, r := range res.Rows {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  %s: %s\n", r.Mode, n)
		}
	}
}
