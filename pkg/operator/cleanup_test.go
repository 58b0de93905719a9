package operator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// Cleanup must leave no SecondaryScheduler in the namespace and none of their cluster-scoped
// RBAC, without an operator running, and must not touch other namespaces.
func TestCleanup(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	mine := testCR()
	mine.Finalizers = []string{Finalizer}
	other := testCR()
	other.Namespace, other.UID = "elsewhere", "uid-2"
	other.Finalizers = []string{Finalizer}
	var objs []client.Object
	objs = append(objs, mine, other)
	for _, ss := range []*berthv1alpha1.SecondaryScheduler{mine, other} {
		RBAC(ss).Each(func(o metav1.Object) {
			if o.GetNamespace() != ss.Namespace { // what the finalizer must remove
				objs = append(objs, o.(client.Object))
			}
		})
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Cleanup(ctx, c, CleanupOptions{Namespace: mine.Namespace, OperatorDeployment: "berth-operator", OperatorLease: "berth-operator"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(mine), &berthv1alpha1.SecondaryScheduler{}); !apierrors.IsNotFound(err) {
		t.Errorf("SecondaryScheduler %s/%s still there: %v", mine.Namespace, mine.Name, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), &berthv1alpha1.SecondaryScheduler{}); err != nil {
		t.Errorf("SecondaryScheduler in another namespace: %v", err)
	}
	for _, tc := range []struct {
		ss   *berthv1alpha1.SecondaryScheduler
		want int
	}{{mine, 0}, {other, 4}} {
		var crbs rbacv1.ClusterRoleBindingList
		if err := c.List(ctx, &crbs, client.MatchingLabels(OwnerLabels(tc.ss))); err != nil {
			t.Fatal(err)
		}
		if len(crbs.Items) != tc.want {
			t.Errorf("%s/%s: %d ClusterRoleBindings left, want %d", tc.ss.Namespace, tc.ss.Name, len(crbs.Items), tc.want)
		}
	}
	var crs rbacv1.ClusterRoleList
	if err := c.List(ctx, &crs, client.MatchingLabels(OwnerLabels(mine))); err != nil || len(crs.Items) != 0 {
		t.Errorf("ClusterRoles left: %d %v", len(crs.Items), err)
	}
	var rbs rbacv1.RoleBindingList
	if err := c.List(ctx, &rbs, client.InNamespace("kube-system"), client.MatchingLabels(OwnerLabels(mine))); err != nil || len(rbs.Items) != 0 {
		t.Errorf("kube-system RoleBindings left: %d %v", len(rbs.Items), err)
	}
}

func TestCleanupTimesOut(t *testing.T) {
	// A resource nobody can finish (a foreign finalizer) ends in an error naming the namespace.
	scheme, _ := Scheme()
	ss := testCR()
	ss.Finalizers = []string{"example.com/hold"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ss).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err := Cleanup(ctx, c, CleanupOptions{Namespace: ss.Namespace, OperatorDeployment: "berth-operator", OperatorLease: "berth-operator"})
	if err == nil || !strings.Contains(err.Error(), "left in berth-system: s") {
		t.Fatalf("want a timeout naming the namespace, got %v", err)
	}
}

// cluster simulates, behind a fake client, what the real control plane does during the
// hook: the ReplicaSet controller removes the operator's pods a few polls after its
// Deployment is scaled to 0, and the garbage collector removes a scheduler's pods a few polls
// after its SecondaryScheduler is gone (unless stuck). It records the order of events and
// every violation of "a Lease is deleted only when no pod that could renew it is left".
type cluster struct {
	t                               *testing.T
	stuckOperator, stuckScheduler   bool
	zeroPolls, crGonePolls          int
	events, violations              []string
	operatorLabels, schedulerLabels map[string]string
}

const polls = 3 // polls before the simulated controllers act: the waits must really wait

func (s *cluster) event(e string) { s.events = append(s.events, e) }

func (s *cluster) pods(ctx context.Context, cl client.Client, l map[string]string) []corev1.Pod {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace("berth-system"), client.MatchingLabels(l)); err != nil {
		s.t.Error(err)
	}
	return pods.Items
}

func (s *cluster) deleteAll(ctx context.Context, cl client.Client, pods []corev1.Pod) {
	for i := range pods {
		if err := cl.Delete(ctx, &pods[i]); err != nil {
			s.t.Error(err)
		}
	}
}

// tick runs the simulated controllers once (on each pod list, i.e. each poll).
func (s *cluster) tick(ctx context.Context, cl client.Client) {
	d := &appsv1.Deployment{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "berth-system", Name: "berth-operator"}, d); err == nil && *d.Spec.Replicas == 0 {
		if s.zeroPolls++; s.zeroPolls == polls && !s.stuckOperator {
			s.deleteAll(ctx, cl, s.pods(ctx, cl, s.operatorLabels))
			s.event("operator pods gone")
		}
	}
	err := cl.Get(ctx, client.ObjectKey{Namespace: "berth-system", Name: "s"}, &berthv1alpha1.SecondaryScheduler{})
	if apierrors.IsNotFound(err) {
		if s.crGonePolls++; s.crGonePolls == polls && !s.stuckScheduler {
			s.deleteAll(ctx, cl, s.pods(ctx, cl, s.schedulerLabels))
			s.event("scheduler pods gone")
		}
	}
}

func (s *cluster) client(t *testing.T, objs ...client.Object) client.Client {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PodList); ok {
				s.tick(ctx, cl)
			}
			return cl.List(ctx, list, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			if _, ok := o.(*appsv1.Deployment); ok {
				s.event("scale " + o.GetName())
			}
			return cl.Patch(ctx, o, p, opts...)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			switch o.(type) {
			case *coordinationv1.Lease:
				s.event("delete Lease " + o.GetName())
				if n := len(s.pods(ctx, cl, s.operatorLabels)) + len(s.pods(ctx, cl, s.schedulerLabels)); n > 0 {
					s.violations = append(s.violations, fmt.Sprintf("Lease %s deleted with %d holder pods left", o.GetName(), n))
				}
			case *berthv1alpha1.SecondaryScheduler:
				s.event("delete SecondaryScheduler " + o.GetName())
				if n := len(s.pods(ctx, cl, s.operatorLabels)); n > 0 {
					s.violations = append(s.violations, fmt.Sprintf("SecondaryScheduler deleted with %d operator pods left", n))
				}
			}
			return cl.Delete(ctx, o, opts...)
		},
	}).Build()
}

func pod(name string, l map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "berth-system", Labels: l}}
}

func lease(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "berth-system"}}
}

// The hook's order: operator stopped, then resources deleted, then their scheduler pods gone,
// and only then the Leases; a step that cannot finish stops the hook with an error naming what
// is left, before any Lease is touched.
func TestCleanupOrder(t *testing.T) {
	opts := CleanupOptions{Namespace: "berth-system", OperatorDeployment: "berth-operator", OperatorLease: "berth-operator",
		Interval: 5 * time.Millisecond}
	for _, tc := range []struct {
		name                         string
		stuckOperator, stuckSchedule bool
		wantErr                      []string // substrings
		wantEvents                   []string
		wantLeases                   []string // left afterwards
	}{{
		name: "everything goes, in order",
		wantEvents: []string{"scale berth-operator", "operator pods gone", "delete SecondaryScheduler s", "scheduler pods gone",
			"delete Lease berth-operator", "delete Lease sched-a"},
		wantLeases: []string{"unrelated"},
	}, {
		name: "an operator pod that never goes: nothing deleted", stuckOperator: true,
		wantErr:    []string{"operator pods of Deployment berth-operator still in berth-system: operator-0", "deadline exceeded"},
		wantEvents: []string{"scale berth-operator"},
		wantLeases: []string{"berth-operator", "sched-a", "unrelated"},
	}, {
		name: "a scheduler pod that never goes: Leases kept", stuckSchedule: true,
		wantErr:    []string{"scheduler pods of SecondaryScheduler berth-system/s still in berth-system: sched-0", "deadline exceeded"},
		wantEvents: []string{"scale berth-operator", "operator pods gone", "delete SecondaryScheduler s"},
		wantLeases: []string{"berth-operator", "sched-a", "unrelated"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ss := testCR()
			ss.Spec.SchedulerName = "sched-a" // the Lease is named after the schedulerName, not the resource
			ss.Finalizers = []string{Finalizer}
			opLabels := map[string]string{"app.kubernetes.io/name": "berth-operator", "app.kubernetes.io/instance": "berth"}
			sim := &cluster{t: t, stuckOperator: tc.stuckOperator, stuckScheduler: tc.stuckSchedule,
				operatorLabels: opLabels, schedulerLabels: PodLabels(ss)}
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "berth-operator", Namespace: "berth-system"},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: opLabels}}}
			// Another scheduler's pod (other instance label) and the hook's own pod: not waited for.
			otherSched := map[string]string{"app.kubernetes.io/name": "berth-scheduler", "app.kubernetes.io/instance": "other"}
			hook := map[string]string{"app.kubernetes.io/name": "berth-operator-cleanup", "app.kubernetes.io/instance": "berth"}
			c := sim.client(t, dep, ss, pod("operator-0", opLabels), pod("operator-1", opLabels), pod("sched-0", PodLabels(ss)),
				pod("bystander", otherSched), pod("hook", hook), lease("berth-operator"), lease("sched-a"), lease("unrelated"))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := Cleanup(ctx, c, opts)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to contain %q", err, w)
				}
			}
			if got := strings.Join(sim.events, "; "); got != strings.Join(tc.wantEvents, "; ") {
				t.Errorf("events:\n got %s\nwant %s", got, strings.Join(tc.wantEvents, "; "))
			}
			for _, v := range sim.violations {
				t.Error(v)
			}
			var leases coordinationv1.LeaseList
			if err := c.List(context.Background(), &leases, client.InNamespace("berth-system")); err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, l := range leases.Items {
				left = append(left, l.Name)
			}
			sort.Strings(left)
			if strings.Join(left, ",") != strings.Join(tc.wantLeases, ",") {
				t.Errorf("Leases left %v, want %v", left, tc.wantLeases)
			}
			if d := (&appsv1.Deployment{}); c.Get(context.Background(), client.ObjectKeyFromObject(dep), d) != nil || *d.Spec.Replicas != 0 {
				t.Errorf("operator Deployment not scaled to 0: %v", d.Spec.Replicas)
			}
			if err != nil {
				return
			}
			// Idempotent: a second run (a retried hook) finds nothing to do and succeeds.
			sim.events = nil
			if err := Cleanup(ctx, c, opts); err != nil {
				t.Errorf("second run: %v", err)
			}
			if len(sim.events) != 1 || sim.events[0] != "delete Lease berth-operator" {
				t.Errorf("second run events %v, want only the (NotFound) operator Lease delete", sim.events)
			}
		})
	}
}

// Bad input gets a clear error, before anything is touched.
func TestCleanupNeedsNames(t *testing.T) {
	scheme, _ := Scheme()
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	for _, o := range []CleanupOptions{
		{OperatorDeployment: "d", OperatorLease: "l"},
		{Namespace: "n", OperatorLease: "l"},
		{Namespace: "n", OperatorDeployment: "d"},
	} {
		if err := Cleanup(context.Background(), c, o); err == nil || !strings.Contains(err.Error(), "cleanup needs") {
			t.Errorf("%+v: got %v", o, err)
		}
	}
}
