// Package failover kills the leader of two real berth-scheduler processes in the middle of a
// 2000-pod burst, and the leader of two real berth-operator processes in the middle of a
// rollout, on one local cluster with KWOK nodes, and checks what a user relies on: the standby
// takes over within the lease timings, no pod is bound twice or left Pending, and the
// scheduler Deployment is rolled exactly once per change. See README.md for the timings.
package failover

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

const (
	burstNS   = "burst"
	burstPods = 2000
	// The leader is killed once this many pods are bound: mid-burst, with most still to go.
	killAfterBound = 500
	// acquiredLog is what client-go's leader election logs when a candidate becomes leader.
	acquiredLog = "Successfully acquired lease"
	// takeoverGoal is the end-to-end goal from SIGKILL to the standby's first binding (issue 13).
	takeoverGoal = 30 * time.Second
)

// bindingTrouble are scheduler log lines that mean a binding was refused or raced: a second
// binding of a bound pod is refused by the API server with one of these.
var bindingTrouble = []string{"already assigned to node", "Binding rejected", "Operation cannot be fulfilled on pods"}

func TestSchedulerLeaderKilledMidBurst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	c := suite
	nodes := make([]cluster.NodeSpec, 20)
	for i := range nodes {
		nodes[i] = cluster.NodeSpec{Name: fmt.Sprintf("fo-node-%02d", i), CPU: "64", Memory: "256Gi", Pods: 150}
	}
	if err := c.AddNodes(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, burstNS); err != nil {
		t.Fatal(err)
	}

	// The configuration the operator deploys for a SecondaryScheduler with replicas: 2 (the
	// operator renders it with this same code): its leaderElection block, the Lease named after
	// the scheduler in the resource's namespace, upstream's default lease timings. The
	// load-aware plugins point at a closed port: without load data they score neutrally, and
	// their Reserve/tracker path still runs for every pod.
	ss := &berthv1alpha1.SecondaryScheduler{
		ObjectMeta: metav1.ObjectMeta{Name: "berth", Namespace: "kube-system"},
		Spec: berthv1alpha1.SecondarySchedulerSpec{
			SchedulerName: cluster.BerthScheduler,
			Replicas:      ptr.To[int32](2),
			Plugins: &berthv1alpha1.PluginSet{
				TargetLoadPacking: &berthv1alpha1.TargetLoadPackingPlugin{Args: configv1.TargetLoadPackingArgs{
					LoadAwareArgs: configv1.LoadAwareArgs{WatcherAddress: "http://127.0.0.1:9"}}},
				LoadVariationRiskBalancing: &berthv1alpha1.LoadVariationRiskBalancingPlugin{Args: configv1.LoadVariationRiskBalancingArgs{
					LoadAwareArgs: configv1.LoadAwareArgs{WatcherAddress: "http://127.0.0.1:9"}}},
			},
		},
	}
	rendered, err := schedconfig.Render(ss, nil)
	if err != nil {
		t.Fatal(err)
	}
	lease := types.NamespacedName{Namespace: ss.Namespace, Name: ss.Spec.SchedulerName}
	t.Logf("lease %s; timings: upstream KubeSchedulerConfiguration defaults (leaseDuration 15s, renewDeadline 10s, retryPeriod 2s)", lease)

	var scheds []*cluster.SchedulerProcess
	for i := 1; i <= 2; i++ {
		p, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: fmt.Sprintf("berth-scheduler-%d", i), Config: string(rendered.YAML)})
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, p)
		t.Cleanup(func() { c.StopComponent(p.Process) })
	}
	procs := []*cluster.Process{scheds[0].Process, scheds[1].Process}
	leaderIdx, err := waitLeader(ctx, procs)
	if err != nil {
		t.Fatal(err)
	}
	leader, standby := scheds[leaderIdx], scheds[1-leaderIdx]
	holder, err := leaseHolder(ctx, c.Client, lease)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s (lease holder %s), standby %s", leader.Name, holder, standby.Name)

	// Every pod's bindings as the API server reports them, from before the first pod exists.
	list, err := c.Client.CoreV1().Pods(burstNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := newBindRecorder()
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() { watchDone <- rec.watch(watchCtx, c.Client, burstNS, list.ResourceVersion) }()
	defer func() {
		stopWatch()
		<-watchDone
	}()

	created := make(chan error, 1)
	go func() {
		spec := framework.PodSpec(cluster.BerthScheduler, "10m", "16Mi")
		created <- parallel(ctx, 8, burstPods, func(i int) error {
			_, err := c.Client.CoreV1().Pods(burstNS).Create(ctx, framework.Pod(burstNS, fmt.Sprintf("pod-%04d", i), map[string]string{"burst": "yes"}, spec), metav1.CreateOptions{})
			return err
		})
	}()

	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return rec.bound() >= killAfterBound, nil
	}); err != nil {
		t.Fatalf("only %d pods bound before the kill point: %v\n%s", rec.bound(), err, leader.Tail(30))
	}
	killAt := time.Now()
	if err := syscall.Kill(leader.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.Done()
	boundAtKill := rec.bound()
	t.Logf("SIGKILL %s with %d of %d pods bound", leader.Name, boundAtKill, burstPods)

	var acquiredAt time.Time
	var newHolder string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		h, err := leaseHolder(ctx, c.Client, lease)
		if err != nil || h == holder || h == "" {
			return false, nil
		}
		acquiredAt, newHolder = time.Now(), h
		return true, nil
	}); err != nil {
		t.Fatalf("the standby never took the lease: %v\n%s", err, standby.Tail(30))
	}
	if err := <-created; err != nil {
		t.Fatalf("creating the burst: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return rec.bound() >= burstPods, nil
	}); err != nil {
		t.Fatalf("%d of %d pods bound after the takeover: %v\n%s", rec.bound(), burstPods, err, standby.Tail(30))
	}
	// Bindings the killed leader had in flight land within moments of the kill; anything
	// later than a second after it is the new leader's.
	firstNew, lastBind := rec.firstBoundAfter(killAt.Add(time.Second)), rec.last()
	if firstNew.IsZero() {
		t.Fatalf("no binding after the kill, yet all %d pods are bound (%d at the kill)", burstPods, boundAtKill)
	}
	takeover := firstNew.Sub(killAt)
	t.Logf("lease taken by %s %.1fs after SIGKILL; first binding by the new leader %.1fs after SIGKILL; burst done %.1fs after SIGKILL",
		newHolder, acquiredAt.Sub(killAt).Seconds(), takeover.Seconds(), lastBind.Sub(killAt).Seconds())
	if takeover > takeoverGoal {
		t.Errorf("takeover took %s, goal %s", takeover.Round(100*time.Millisecond), takeoverGoal)
	}

	t.Run("every pod bound exactly once, none left Pending", func(t *testing.T) {
		if errs := rec.problems(burstPods); len(errs) > 0 {
			t.Errorf("%d binding problems, first: %s", len(errs), strings.Join(errs[:min(len(errs), 10)], "; "))
		}
		pods, err := framework.WaitPods(ctx, c.Client, burstNS, "burst=yes", burstPods, time.Minute, framework.Running)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if n, ok := rec.node(p.Name); !ok || n != p.Spec.NodeName {
				t.Errorf("pod %s is on %q, its one binding said %q", p.Name, p.Spec.NodeName, n)
			}
		}
	})

	t.Run("at most one Scheduled event per pod, exactly one for the new leader's, no FailedScheduling", func(t *testing.T) {
		// Events are sent asynchronously: the killed leader may have lost a few of its own;
		// the new leader's arrive shortly after its bindings.
		afterKill := rec.boundAfter(killAt.Add(time.Second))
		var events map[types.UID][]framework.SchedulingEvent
		var names map[types.UID]string
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			if events, names, err = podEvents(ctx, c.Client, burstNS); err != nil {
				return false, nil
			}
			for uid, name := range names {
				if afterKill[name] && countReason(events[uid], "Scheduled") == 0 {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Logf("waiting for the new leader's events: %v", err)
		}
		var twice, missing, failed []string
		for uid, name := range names {
			n := countReason(events[uid], "Scheduled")
			switch {
			case n > 1:
				twice = append(twice, fmt.Sprintf("%s (%d)", name, n))
			case n == 0 && afterKill[name]:
				missing = append(missing, name)
			}
			if countReason(events[uid], "FailedScheduling") > 0 {
				failed = append(failed, name)
			}
		}
		sort.Strings(twice)
		sort.Strings(missing)
		sort.Strings(failed)
		if len(twice) > 0 || len(missing) > 0 || len(failed) > 0 {
			t.Errorf("Scheduled twice: %v; new leader's pods without a Scheduled event: %v; FailedScheduling: %v",
				head(twice), head(missing), head(failed))
		}
		t.Logf("%d pods bound after the kill, each with one Scheduled event", len(afterKill))
	})

	t.Run("no binding conflicts in either scheduler's log", func(t *testing.T) {
		for _, p := range procs {
			b, err := os.ReadFile(p.LogPath)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				for _, bad := range bindingTrouble {
					if strings.Contains(line, bad) {
						t.Errorf("%s: %s", p.Name, line)
					}
				}
			}
		}
		if n := strings.Count(readFile(standby.LogPath), acquiredLog); n != 1 {
			t.Errorf("the standby acquired the lease %d times, want once", n)
		}
	})
}

// waitLeader returns the index of the process that logs acquiring the lease first.
func waitLeader(ctx context.Context, procs []*cluster.Process) (int, error) {
	idx := -1
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for i, p := range procs {
			if strings.Contains(readFile(p.LogPath), acquiredLog) {
				if idx >= 0 {
					return false, fmt.Errorf("both %s and %s acquired the lease", procs[idx].Name, p.Name)
				}
				idx = i
			}
		}
		return idx >= 0, nil
	})
	if err != nil {
		var tails []string
		for _, p := range procs {
			tails = append(tails, p.Name+":\n"+p.Tail(15))
		}
		return -1, fmt.Errorf("no leader elected: %w\n%s", err, strings.Join(tails, "\n"))
	}
	return idx, nil
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func leaseHolder(ctx context.Context, c kubernetes.Interface, key types.NamespacedName) (string, error) {
	l, err := c.CoordinationV1().Leases(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return holderOf(l), nil
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// bindRecorder keeps every change of each pod's spec.nodeName the API server reported.
type bindRecorder struct {
	mu    sync.Mutex
	pods  map[string]*podRecord
	order []time.Time // binding times, in arrival order
}

type podRecord struct {
	node     string
	boundAt  time.Time
	bindings int      // "" → node transitions seen
	moves    []string // node → other node transitions (impossible unless bound twice)
	deleted  bool
}

func newBindRecorder() *bindRecorder { return &bindRecorder{pods: map[string]*podRecord{}} }

// watch records until ctx ends, resuming from the last resource version when the API server
// closes the watch.
func (r *bindRecorder) watch(ctx context.Context, c kubernetes.Interface, ns, rv string) error {
	for ctx.Err() == nil {
		w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				w.Stop()
				return apierrors.FromObject(ev.Object)
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = pod.ResourceVersion
			if ev.Type != watch.Bookmark {
				r.observe(pod, ev.Type == watch.Deleted)
			}
		}
	}
	return nil
}

func (r *bindRecorder) observe(pod *corev1.Pod, deleted bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[pod.Name]
	if p == nil {
		p = &podRecord{}
		r.pods[pod.Name] = p
	}
	p.deleted = p.deleted || deleted
	switch n := pod.Spec.NodeName; {
	case n == "" || n == p.node:
	case p.node == "":
		p.node, p.boundAt = n, now
		p.bindings++
		r.order = append(r.order, now)
	default:
		p.moves = append(p.moves, p.node+"→"+n)
		p.node = n
	}
}

func (r *bindRecorder) bound() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

func (r *bindRecorder) last() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.order) == 0 {
		return time.Time{}
	}
	return r.order[len(r.order)-1]
}

func (r *bindRecorder) firstBoundAfter(t time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, at := range r.order {
		if at.After(t) {
			return at
		}
	}
	return time.Time{}
}

func (r *bindRecorder) boundAfter(t time.Time) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for name, p := range r.pods {
		if p.bindings > 0 && p.boundAt.After(t) {
			out[name] = true
		}
	}
	return out
}

func (r *bindRecorder) node(name string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[name]
	if p == nil {
		return "", false
	}
	return p.node, true
}

// problems lists every pod not bound exactly once, moved, or deleted, and a pod count other
// than want.
func (r *bindRecorder) problems(want int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	if len(r.pods) != want {
		out = append(out, fmt.Sprintf("%d pods seen, want %d", len(r.pods), want))
	}
	for name, p := range r.pods {
		switch {
		case p.bindings != 1:
			out = append(out, fmt.Sprintf("%s bound %d times", name, p.bindings))
		case len(p.moves) > 0:
			out = append(out, fmt.Sprintf("%s moved %v", name, p.moves))
		case p.deleted:
			out = append(out, name+" deleted")
		}
	}
	sort.Strings(out)
	return out
}

// podEvents returns the scheduling events of ns by pod UID, and each pod's name by UID.
func podEvents(ctx context.Context, c kubernetes.Interface, ns string) (map[types.UID][]framework.SchedulingEvent, map[types.UID]string, error) {
	events, err := framework.SchedulingEvents(ctx, c, ns)
	if err != nil {
		return nil, nil, err
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	names := map[types.UID]string{}
	for _, p := range pods.Items {
		names[p.UID] = p.Name
	}
	return events, names, nil
}

func countReason(events []framework.SchedulingEvent, reason string) int {
	n := 0
	for _, e := range events {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

func head(s []string) []string { return s[:min(len(s), 10)] }

func parallel(ctx context.Context, workers, n int, f func(int) error) error {
	idx := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		idx <- i
	}
	close(idx)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}
