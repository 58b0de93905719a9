package failover

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/operator"
)

const (
	opNS = "berth-system"
	// The operators' Lease: the chart's --leader-election-id, in kube-system as outside a pod.
	opLeaseNS, opLease = "kube-system", "berth-operator"
	ssName             = "sched"
	revisionAnnotation = "deployment.kubernetes.io/revision"
)

type opEnv struct {
	t     *testing.T
	ctx   context.Context
	c     *cluster.Cluster
	cl    client.Client
	procs []*cluster.Process
}

func TestOperatorLeaderKilledDuringRollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	c := suite
	// Two KWOK nodes run the scheduler Deployment's pods, so its status comes from the real
	// controller manager.
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: "fo-op-1", CPU: "4", Memory: "8Gi"}, cluster.NodeSpec{Name: "fo-op-2", CPU: "4", Memory: "8Gi"}); err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, opNS); err != nil {
		t.Fatal(err)
	}
	framework.InstallSecondarySchedulerCRDOrFail(ctx, t, c)
	cl := framework.OperatorClient(t, c)
	e := &opEnv{t: t, ctx: ctx, c: c, cl: cl}
	e.startOperator("berth-operator-1")
	e.startOperator("berth-operator-2")
	leaderIdx, err := waitLeader(ctx, e.procs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("operator leader %s; timings: controller-runtime defaults (leaseDuration 15s, renewDeadline 10s, retryPeriod 2s)", e.procs[leaderIdx].Name)

	ss := &berthv1alpha1.SecondaryScheduler{
		ObjectMeta: metav1.ObjectMeta{Name: ssName, Namespace: opNS},
		Spec: berthv1alpha1.SecondarySchedulerSpec{
			SchedulerName: "berth-failover",
			Image:         "berth-scheduler:e2e",
			// Its pods "run" on simulated nodes.
			Tolerations: []corev1.Toleration{cluster.SimulatedToleration},
			Replicas:    ptr.To[int32](2),
			Plugins: &berthv1alpha1.PluginSet{TargetLoadPacking: &berthv1alpha1.TargetLoadPackingPlugin{
				Args: configv1.TargetLoadPackingArgs{
					LoadAwareArgs:     configv1.LoadAwareArgs{WatcherAddress: "http://berth-loadwatcher:2020"},
					TargetUtilization: ptr.To[int64](40),
				},
			}},
		},
	}
	if err := cl.Create(ctx, ss); err != nil {
		t.Fatal(err)
	}
	// The scheduler's pods "run" on KWOK nodes: a stand-in holds its Lease, so the operators
	// can report it Available (they would not report a scheduler without a leader).
	if err := framework.StandInLeader(ctx, e.c.Client, opNS, operator.LeaseName(ss), "sched-stand-in"); err != nil {
		t.Fatal(err)
	}
	e.waitRolledOut("first rollout", "")
	if n, rev := e.rollouts(); n != 1 || rev != "1" {
		t.Fatalf("after creation: %d ReplicaSets, revision %q; want 1, 1", n, rev)
	}

	// The leader is killed right after it changed the Deployment: the new ReplicaSet is
	// scaling up, the resource's status still describes the old configuration.
	t.Run("leader killed after it rolled the Deployment", func(t *testing.T) {
		leader := e.procs[leaderIdx]
		holder := e.holder()
		before := e.deployment().Spec.Template.Annotations[operator.AnnotationConfigHash]
		e.setTarget(60)
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return e.deployment().Spec.Template.Annotations[operator.AnnotationConfigHash] != before, nil
		}); err != nil {
			t.Fatalf("the leader never rolled the Deployment: %v\n%s", err, leader.Tail(20))
		}
		killAt := time.Now()
		e.kill(leader)
		acquired := e.waitNewHolder(holder)
		converged := e.waitRolledOut("rollout after the takeover", before)
		t.Logf("SIGKILL %s: lease taken %.1fs later, resource converged %.1fs later", leader.Name,
			acquired.Sub(killAt).Seconds(), converged.Sub(killAt).Seconds())
		e.checkRolledOnce(2)
	})

	// The leader is frozen before the change reaches it, then killed: the standby does the
	// whole rollout, once.
	t.Run("leader killed before it saw the change", func(t *testing.T) {
		e.startOperator("berth-operator-3")
		idx, err := e.currentLeader()
		if err != nil {
			t.Fatal(err)
		}
		leader := e.procs[idx]
		holder := e.holder()
		before := e.deployment().Spec.Template.Annotations[operator.AnnotationConfigHash]
		if err := syscall.Kill(leader.PID(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		e.setTarget(70)
		// Well inside the 15 s lease: nobody may act on the change yet.
		time.Sleep(2 * time.Second)
		if h := e.deployment().Spec.Template.Annotations[operator.AnnotationConfigHash]; h != before {
			t.Fatalf("the Deployment changed while its leader was frozen (hash %s → %s): two leaders", before, h)
		}
		killAt := time.Now()
		e.kill(leader)
		acquired := e.waitNewHolder(holder)
		converged := e.waitRolledOut("rollout by the new leader", before)
		t.Logf("SIGKILL %s (frozen): lease taken %.1fs later, resource converged %.1fs later", leader.Name,
			acquired.Sub(killAt).Seconds(), converged.Sub(killAt).Seconds())
		e.checkRolledOnce(3)
	})
}

func (e *opEnv) startOperator(name string) {
	e.t.Helper()
	p, err := framework.StartOperator(e.ctx, e.c, framework.OperatorOptions{Name: name, LeaderElection: true, LeaseNamespace: opLeaseNS, LeaseID: opLease})
	if err != nil {
		e.t.Fatal(err)
	}
	e.procs = append(e.procs, p)
	e.t.Cleanup(func() { e.c.StopComponent(p) })
}

// currentLeader is the live process that logged acquiring the lease (killed ones are skipped).
func (e *opEnv) currentLeader() (int, error) {
	for i, p := range e.procs {
		if exited, _ := p.Exited(); !exited && strings.Contains(readFile(p.LogPath), acquiredLog) {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no live operator holds the lease")
}

func (e *opEnv) kill(p *cluster.Process) {
	e.t.Helper()
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	<-p.Done()
}

func (e *opEnv) holder() string {
	e.t.Helper()
	h, err := leaseHolder(e.ctx, e.c.Client, types.NamespacedName{Namespace: opLeaseNS, Name: opLease})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func (e *opEnv) waitNewHolder(old string) time.Time {
	e.t.Helper()
	var at time.Time
	if err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		h, err := leaseHolder(ctx, e.c.Client, types.NamespacedName{Namespace: opLeaseNS, Name: opLease})
		if err != nil || h == "" || h == old {
			return false, nil
		}
		at = time.Now()
		return true, nil
	}); err != nil {
		e.t.Fatalf("no operator took the lease over: %v", err)
	}
	return at
}

func (e *opEnv) setTarget(v int64) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s := &berthv1alpha1.SecondaryScheduler{}
		if err := e.cl.Get(ctx, types.NamespacedName{Namespace: opNS, Name: ssName}, s); err != nil {
			return false, err
		}
		s.Spec.Plugins.TargetLoadPacking.Args.TargetUtilization = ptr.To(v)
		if err := e.cl.Update(ctx, s); apierrors.IsConflict(err) {
			return false, nil // the operator wrote status meanwhile
		} else if err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *opEnv) deployment() *appsv1.Deployment {
	e.t.Helper()
	d := &appsv1.Deployment{}
	if err := e.cl.Get(e.ctx, types.NamespacedName{Namespace: opNS, Name: ssName}, d); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// waitRolledOut waits until the resource reports its current generation rolled out and
// available, on a configuration other than oldHash, and the Deployment has every replica on
// that template; it returns when that was first seen.
func (e *opEnv) waitRolledOut(what, oldHash string) time.Time {
	e.t.Helper()
	var last berthv1alpha1.SecondarySchedulerStatus
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		s := &berthv1alpha1.SecondaryScheduler{}
		d := &appsv1.Deployment{}
		if e.cl.Get(ctx, types.NamespacedName{Namespace: opNS, Name: ssName}, s) != nil ||
			e.cl.Get(ctx, types.NamespacedName{Namespace: opNS, Name: ssName}, d) != nil {
			return false, nil
		}
		last = s.Status
		avail := meta.FindStatusCondition(s.Status.Conditions, "Available")
		prog := meta.FindStatusCondition(s.Status.Conditions, "Progressing")
		return s.Status.ObservedGeneration == s.Generation && s.Status.ConfigHash != "" && s.Status.ConfigHash != oldHash &&
			d.Spec.Template.Annotations[operator.AnnotationConfigHash] == s.Status.ConfigHash &&
			avail != nil && avail.Status == metav1.ConditionTrue && prog != nil && prog.Status == metav1.ConditionFalse &&
			s.Status.ReadyReplicas == 2 && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 2 &&
			d.Status.Replicas == 2, nil
	})
	if err != nil {
		var tails []string
		for _, p := range e.procs {
			tails = append(tails, p.Name+":\n"+p.Tail(10))
		}
		e.t.Fatalf("%s: %v; last status %+v\n%s", what, err, last, strings.Join(tails, "\n"))
	}
	return time.Now()
}

// rollouts counts the Deployment's ReplicaSets (one per template it ever had) and returns its
// revision.
func (e *opEnv) rollouts() (int, string) {
	e.t.Helper()
	d := e.deployment()
	var rsl appsv1.ReplicaSetList
	if err := e.cl.List(e.ctx, &rsl, client.InNamespace(opNS)); err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, rs := range rsl.Items {
		for _, o := range rs.OwnerReferences {
			if o.UID == d.UID {
				n++
			}
		}
	}
	return n, d.Annotations[revisionAnnotation]
}

// checkRolledOnce checks the Deployment had exactly want templates, now and a few seconds
// later (a new leader re-rendering a different template would roll it again on its next
// reconcile, which a Deployment status change triggers).
func (e *opEnv) checkRolledOnce(want int) {
	e.t.Helper()
	for _, wait := range []time.Duration{0, 5 * time.Second} {
		time.Sleep(wait)
		if n, rev := e.rollouts(); n != want || rev != fmt.Sprint(want) {
			e.t.Errorf("after %s: %d ReplicaSets, revision %q; want %d, %d (rolled exactly once per change)", wait, n, rev, want, want)
		}
	}
}
