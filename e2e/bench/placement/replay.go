package placement

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
)

// replay is one run of a scenario with one scheduler configuration: what its parts share.
type replay struct {
	c         *cluster.Cluster
	p         *pipeline
	o         Options
	rc        RunConfig
	ns        string
	sc        *Scenario
	r         *RunResult
	l         *live
	schedName string
	probe     *placedProbe
	orc       *oracle
	acct      *Accounting
	book      *book
	poll      *poller
	preds     *predictions
	// mu guards r's notes and created while a wave's requests run in parallel.
	mu      sync.Mutex
	created map[string]bool
}

// runOne replays the scenario with one scheduler configuration, from the state every run starts
// from (no pod, the nodes at their base load), and leaves that state behind.
func runOne(ctx context.Context, c *cluster.Cluster, p *pipeline, o Options, rc RunConfig, ns string) (*RunResult, error) {
	sc := p.sc
	x := &replay{c: c, p: p, o: o, rc: rc, ns: ns, sc: sc, schedName: corev1.DefaultSchedulerName,
		r:    &RunResult{Name: rc.Name, Key: rc.Key, Waves: sc.Waves, Oversized: len(sc.Oversized())},
		acct: NewAccounting(sc), book: newBook(sc), created: map[string]bool{}}
	if err := p.resetLoads(); err != nil {
		return nil, err
	}
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		return nil, err
	}
	l, err := p.startLive(ctx, ns, o.SampleInterval, o.ReportInterval, o.windows())
	if err != nil {
		return nil, err
	}
	defer l.stop(c)
	x.l = l
	stopSched, err := x.startScheduler(ctx)
	if err != nil {
		return nil, err
	}
	defer stopSched()
	stopSim, err := x.startSimulator(ctx)
	if err != nil {
		return nil, err
	}
	defer stopSim()
	if err := x.waves(ctx); err != nil {
		return nil, err
	}
	if err := x.readBack(ctx); err != nil {
		return nil, err
	}
	return x.r, x.cleanup(ctx)
}

// startScheduler starts the run's berth-scheduler (or the oracle) and waits until it has read
// the watcher once; the stock scheduler is the cluster's.
func (x *replay) startScheduler(ctx context.Context) (stop func(), err error) {
	x.preds = newPredictions()
	if x.rc.Oracle {
		x.orc, x.schedName = newOracle(x.sc, x.rc.OracleSigmas), OracleScheduler
		x.orc.packTarget = x.rc.OraclePack
		return func() {}, nil
	}
	if !x.rc.Berth() {
		return func() {}, nil
	}
	cfg, err := x.rc.render(x.l.watcher.URL, Timing{RefreshSeconds: x.o.RefreshSeconds, ProfileMinAgeSeconds: x.o.profileMinAge()})
	if err != nil {
		return nil, err
	}
	sched, err := x.c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-" + x.ns, Config: cfg, Binary: x.rc.binary})
	if err != nil {
		return nil, err
	}
	stop = func() { x.c.StopComponent(sched.Process) }
	metrics, err := stack.SchedulerMetrics(ctx, x.c, sched.Port)
	if err != nil {
		stop()
		return nil, err
	}
	// Pods scheduled before the first fetch would see every node neutral.
	if err := stack.WaitFetched(ctx, metrics, x.rc.WaitPlugin, time.Minute); err != nil {
		stop()
		return nil, fmt.Errorf("berth-scheduler never fetched the load watcher: %v\n%s", err, sched.Tail(20))
	}
	x.schedName = SchedulerName
	if x.probe, err = newPlacedProbe(x.c, sched.Port, x.l.watcher.URL); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// startSimulator watches the run's pods: the ones the API says run on a node add their true use
// to its fixture /proc; pods seen bound start their prediction's record; the oracle's pods are
// bound.
func (x *replay) startSimulator(ctx context.Context) (stop func(), err error) {
	simCtx, stopSim := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(x.c.Client, 0, informers.WithNamespace(x.ns))
	podInf := factory.Core().V1().Pods().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    x.observe,
		UpdateFunc: func(_, n any) { x.observe(n) },
		DeleteFunc: x.deleted,
	}); err != nil {
		stopSim()
		return nil, err
	}
	x.preds.start(simCtx, x)
	factory.Start(simCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced) {
		stopSim()
		factory.Shutdown()
		return nil, fmt.Errorf("pod informer did not sync")
	}
	simDone := make(chan struct{})
	go func() {
		defer close(simDone)
		simulate(simCtx, x.p, x.acct, x.sc.Seed, x.o.SampleInterval)
	}()
	return func() { stopSim(); <-simDone; factory.Shutdown(); x.preds.stop() }, nil
}

func podOf(obj any) *corev1.Pod {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, _ := obj.(*corev1.Pod)
	return pod
}

// observe is the pod informer's add and update.
func (x *replay) observe(obj any) {
	pod := podOf(obj)
	if pod == nil {
		return
	}
	spec := x.book.spec(pod)
	if spec == nil {
		return // not a scenario pod
	}
	now := time.Now()
	x.acct.Adopt(pod.Name, spec)
	x.acct.SetUID(pod.Name, string(pod.UID))
	switch {
	case pod.DeletionTimestamp != nil:
		x.acct.Gone(pod.Name, now)
		if x.orc != nil {
			x.orc.forget(pod.Name)
		}
	case pod.Spec.NodeName != "":
		x.acct.Bound(pod.Name, pod.Spec.NodeName, now)
		if x.probe != nil {
			x.preds.placed(pod, x.book.ofWorkload(pod.Name))
		}
	case x.orc != nil && pod.Spec.SchedulerName == OracleScheduler:
		x.orc.adopt(pod.Name, spec)
		x.preds.bindOracle(pod)
	}
	if pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
		x.acct.Place(pod.Name, pod.Spec.NodeName)
	} else {
		x.acct.Remove(pod.Name)
	}
}

// deleted is the pod informer's delete.
func (x *replay) deleted(obj any) {
	pod := podOf(obj)
	if pod == nil {
		return
	}
	x.acct.Remove(pod.Name)
	x.acct.Gone(pod.Name, time.Now())
	if x.orc != nil {
		x.orc.forget(pod.Name)
	}
	x.book.forget(pod.Name)
}

// waves runs every wave with the watcher polled throughout, then the end figures.
func (x *replay) waves(ctx context.Context) error {
	o, sc, r := x.o, x.sc, x.r
	start := time.Now()
	x.poll = newPoller(x.l.watcher.URL, sc, start)
	x.poll.target, x.poll.timeScale = o.Target, o.TimeScale
	x.poll.ledger, x.poll.running = x.acct.Breakdown, x.acct.Running
	if x.probe != nil {
		x.poll.placed = x.probe.node
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	go func() { defer close(pollDone); x.poll.run(pollCtx, o.PollInterval) }()
	defer func() { stopPoll(); <-pollDone }()
	// why per wave, for every run: a node a wave opens keeps its pods to the end (nothing moves
	// them), so when the runs part is where a freed-nodes gap comes from.
	var used []string
	for w := 0; w < sc.Waves; w++ {
		used = append(used, strconv.Itoa(x.acct.NodesUsed()))
		if w+1 == o.KillWatcherAtWave {
			x.c.StopComponent(x.l.watcher.Process)
			r.Notes = append(r.Notes, fmt.Sprintf("load watcher stopped at wave %d (%.0f s) by the failure drill", w+1, time.Since(start).Seconds()))
		}
		if x.probe != nil {
			o.Logf("%s wave %d: %s; %d nodes hold pods", x.rc.Name, w+1, x.probe.summary(ctx), x.acct.NodesUsed())
		}
		x.barePods(ctx, w)
		x.workloads(ctx, w)
		r.WavesRun++
		pause := o.WavePause
		if w == sc.Waves-1 {
			pause = o.Settle
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	stopPoll()
	<-pollDone
	r.Notes = append(r.Notes, fmt.Sprintf("nodes holding benchmark pods at the start of each wave, then at the end: %s → %d",
		strings.Join(used, " "), x.acct.NodesUsed()))
	r.Duration = time.Since(start)
	x.poll.finish(r, o.PollInterval)
	x.preds.finish(r, x.poll, x.acct, x.o.predictionWindow())
	if h := x.poll.hottest; x.probe != nil && h.node != "" {
		o.Logf("%s: the pods on %s at its hottest moment, when placed (TargetLoadPacking's predicted utilisation there): %s",
			x.rc.Name, h.node, x.probe.placements(ctx, x.ns, h.pods))
	}
	if exited, _ := x.l.watcher.Exited(); exited && o.KillWatcherAtWave == 0 {
		r.Notes = append(r.Notes, "load watcher exited during the run:\n"+x.l.watcher.Tail(5))
	}
	return nil
}

// note records a problem once per kind, from any goroutine.
func (x *replay) note(key, msg string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.r.noteOnce(key, msg)
}

// barePods deletes the bare pods leaving at wave w and creates those arriving.
func (x *replay) barePods(ctx context.Context, w int) {
	var leave, arrive []PodSpec
	for _, ps := range x.sc.Pods {
		if ps.Leave == w {
			leave = append(leave, ps)
		}
		if ps.Arrive == w {
			arrive = append(arrive, ps)
		}
	}
	zero := int64(0)
	for _, ps := range leave {
		if err := x.c.Client.CoreV1().Pods(x.ns).Delete(ctx, ps.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			x.note("delete", fmt.Sprintf("deleting pods failed (first: %v)", err))
		}
	}
	_ = parallel(ctx, 8, len(arrive), func(i int) error {
		_, err := x.c.Client.CoreV1().Pods(x.ns).Create(ctx, podObject(x.ns, x.schedName, arrive[i]), metav1.CreateOptions{})
		x.mu.Lock()
		defer x.mu.Unlock()
		if err != nil {
			x.r.CreateErrors++
			x.r.noteOnce("create", fmt.Sprintf("creating pods failed (first: %v)", err))
			return nil // counted; the run goes on with the pods that exist
		}
		x.created[arrive[i].Name] = true
		return nil
	})
}

// readBack reads the placements from the API server and cross-checks the watcher's figures
// against the simulator's.
func (x *replay) readBack(ctx context.Context) error {
	r := x.r
	pods, err := x.c.Client.CoreV1().Pods(x.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("reading placements: %w", err)
	}
	used := map[string]bool{}
	for _, pod := range pods.Items {
		if !x.wanted(&pod) || pod.DeletionTimestamp != nil {
			continue
		}
		if pod.Spec.NodeName == "" {
			r.Unplaced++
			continue
		}
		r.Placed++
		used[pod.Spec.NodeName] = true
	}
	r.NodesWithPods = len(used)
	// Cross-check: what the simulator wrote against what the watcher served at the end.
	var sum float64
	var n int
	for node, u := range r.Util {
		exp, _ := x.acct.Expected(node)
		sum += abs(u - exp)
		n++
	}
	if n > 0 {
		r.ServedVsSimulated = sum / float64(n)
	}
	return nil
}

// wanted says pod should be running at the end: a bare pod created and staying, or a replica of
// a workload that stays (its controller keeps it at its count).
func (x *replay) wanted(pod *corev1.Pod) bool {
	if x.created[pod.Name] {
		for _, ps := range x.sc.Pods {
			if ps.Name == pod.Name {
				return ps.Leave < 0
			}
		}
	}
	w := x.book.workloads[pod.Labels[labelWorkload]]
	return w != nil && w.replicasAt(x.sc.Waves-1) > 0 &&
		pod.Labels[labelRevision] == fmt.Sprint(w.revisionAt(x.sc.Waves-1))
}

// cleanup deletes the run's controllers and pods and waits until none is left: the next run
// starts from the same cluster state.
func (x *replay) cleanup(ctx context.Context) error {
	zero := int64(0)
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &bg}
	apps := x.c.Client.AppsV1()
	if err := apps.Deployments(x.ns).DeleteCollection(ctx, del, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := apps.StatefulSets(x.ns).DeleteCollection(ctx, del, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := apps.ReplicaSets(x.ns).DeleteCollection(ctx, del, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := x.c.Client.CoreV1().Pods(x.ns).DeleteCollection(ctx, del, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := x.c.Client.CoreV1().Pods(x.ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil || len(l.Items) > 0 {
			// A controller deleted a moment late may have made one more pod: delete again.
			_ = x.c.Client.CoreV1().Pods(x.ns).DeleteCollection(ctx, del, metav1.ListOptions{})
			return false, nil
		}
		rs, err := apps.ReplicaSets(x.ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(rs.Items) == 0, nil
	}); err != nil {
		return fmt.Errorf("pods of %s still present: %w", x.ns, err)
	}
	return nil
}
