package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig/ipam"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := berthv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func newReconciler(t *testing.T, now time.Time, objs ...client.Object) (*Reconciler, client.Client) {
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "blue"}}})
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).
		WithStatusSubresource(&berthv1alpha1.PodConfig{}, &berthv1alpha1.PodNetwork{}).Build()
	return &Reconciler{
		Client: c, APIReader: c, Allocator: &ipam.Allocator{Client: c, Reader: c},
		RemovalTimeout: time.Minute, Now: func() time.Time { return now },
	}, c
}

// acceptedNetwork is a PodNetwork granting namespaces labelled team=blue, as the network
// controller leaves it once accepted.
func acceptedNetwork(name, bridge, cidr string) *berthv1alpha1.PodNetwork {
	return &berthv1alpha1.PodNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{berthv1alpha1.PodNetworkFinalizer}},
		Spec: berthv1alpha1.PodNetworkSpec{Bridge: bridge, CIDR: cidr,
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}},
		Status: berthv1alpha1.PodNetworkStatus{Conditions: []metav1.Condition{{Type: berthv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
			Reason: ReasonAccepted, LastTransitionTime: metav1.NewTime(t0)}}},
	}
}

func pcAt(name string, created time.Time, network string) *berthv1alpha1.PodConfig {
	return &berthv1alpha1.PodConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: ktypes.UID("uid-pc-" + name), CreationTimestamp: metav1.NewTime(created),
			Finalizers: []string{berthv1alpha1.PodConfigFinalizer}},
		Spec: berthv1alpha1.PodConfigSpec{
			PodSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cnf"}},
			NetworkAttachments: []berthv1alpha1.NetworkAttachment{{Name: "net1", Network: network}},
		},
	}
}

func pod(name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: ktypes.UID("uid-" + name), Labels: labels},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func reconcileAll(t *testing.T, r *Reconciler, names ...string) {
	t.Helper()
	for round := 0; round < 3; round++ {
		for _, n := range names {
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: n}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func get(t *testing.T, c client.Client, name string) *berthv1alpha1.PodConfig {
	t.Helper()
	pc := &berthv1alpha1.PodConfig{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, pc); err != nil {
		t.Fatal(err)
	}
	return pc
}

// The older PodConfig keeps an interface name on a pod; the newer one gets a Failed entry
// naming it and takes no address.
func TestInterfaceConflictOlderWins(t *testing.T) {
	older := pcAt("first", t0, "one")
	newer := pcAt("second", t0.Add(time.Minute), "two")
	r, c := newReconciler(t, t0.Add(time.Hour), older, newer, pod("p", "n1", map[string]string{"app": "cnf"}),
		acceptedNetwork("one", "berth1", "192.168.1.0/24"), acceptedNetwork("two", "berth2", "192.168.2.0/24"))
	reconcileAll(t, r, "second", "first")
	a, b := get(t, c, "first"), get(t, c, "second")
	if len(a.Status.Pods) != 1 || a.Status.Pods[0].State != berthv1alpha1.AttachmentAllocated || a.Status.Pods[0].Address != "192.168.1.1/24" {
		t.Fatalf("older: %+v", a.Status.Pods)
	}
	if len(b.Status.Pods) != 1 || b.Status.Pods[0].State != berthv1alpha1.AttachmentFailed ||
		!strings.Contains(b.Status.Pods[0].LastError, "already claimed by PodConfig first") || b.Status.Pods[0].Address != "" {
		t.Fatalf("newer: %+v", b.Status.Pods)
	}
	if b.Status.Phase != berthv1alpha1.PodConfigFailed || !meta.IsStatusConditionTrue(b.Status.Conditions, berthv1alpha1.ConditionDegraded) {
		t.Fatalf("newer status: %+v", b.Status)
	}
	obj := &berthv1alpha1.IPAllocation{}
	err := c.Get(context.Background(), client.ObjectKey{Name: "two"}, obj)
	if err == nil && len(obj.Spec.Allocations) > 0 {
		t.Fatalf("newer took an address: %+v", obj.Spec.Allocations)
	}
}

// A pod that stops matching goes Removing; its address is kept until its agent confirms, unless
// its node is dead for the removal timeout.
func TestRemovalWaitsForAgentUnlessNodeDead(t *testing.T) {
	cases := []struct {
		name      string
		node      *corev1.Node
		elapsed   time.Duration
		wantFreed bool
	}{
		{"node Ready: keep waiting", readyNode("n1", corev1.ConditionTrue), 10 * time.Minute, false},
		{"node NotReady before timeout: keep waiting", readyNode("n1", corev1.ConditionFalse), 30 * time.Second, false},
		{"node NotReady past timeout: freed", readyNode("n1", corev1.ConditionFalse), 2 * time.Minute, true},
		{"node deleted past timeout: freed", nil, 2 * time.Minute, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pc := pcAt("cfg", t0, "one")
			p := pod("p", "n1", map[string]string{"app": "cnf"})
			objs := []client.Object{pc, p, acceptedNetwork("one", "berth1", "192.168.1.0/24")}
			if tc.node != nil {
				objs = append(objs, tc.node)
			}
			now := t0.Add(time.Hour)
			r, c := newReconciler(t, now, objs...)
			reconcileAll(t, r, "cfg")
			// The pod stops matching.
			p.Labels = map[string]string{"app": "other"}
			if err := c.Update(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			reconcileAll(t, r, "cfg")
			got := get(t, c, "cfg")
			if len(got.Status.Pods) != 1 || got.Status.Pods[0].State != berthv1alpha1.AttachmentRemoving {
				t.Fatalf("want the entry Removing, got %+v", got.Status.Pods)
			}
			r.Now = func() time.Time { return now.Add(tc.elapsed) }
			reconcileAll(t, r, "cfg")
			got = get(t, c, "cfg")
			obj := &berthv1alpha1.IPAllocation{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "one"}, obj); err != nil {
				t.Fatal(err)
			}
			freed := len(obj.Spec.Allocations) == 0
			if freed != tc.wantFreed || (len(got.Status.Pods) == 0) != tc.wantFreed {
				t.Fatalf("freed=%v entries=%+v, want freed=%v", freed, got.Status.Pods, tc.wantFreed)
			}
			if tc.wantFreed {
				c := meta.FindStatusCondition(got.Status.Conditions, berthv1alpha1.ConditionDegraded)
				if c == nil || c.Reason != ReasonRemovalTimedOut || !strings.Contains(c.Message, "n1") {
					t.Fatalf("want Degraded RemovalTimedOut naming n1, got %+v", c)
				}
			}
		})
	}
}

func readyNode(name string, s corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, Reason: "Test"}}}}
}

// What binds a PodConfig can go away under it: the grant (the namespace's labels), the network
// (deleted) or its acceptance. Its entries then go Removing (the agent removes the links; the
// addresses stay held until it confirms) and the PodConfig says why, naming the field.
func TestUnbindRemoves(t *testing.T) {
	cases := []struct {
		name    string
		unbind  func(t *testing.T, c client.Client)
		wantMsg string
	}{
		{"grant revoked", func(t *testing.T, c client.Client) {
			ns := &corev1.Namespace{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "ns"}, ns); err != nil {
				t.Fatal(err)
			}
			ns.Labels = map[string]string{"team": "red"}
			if err := c.Update(context.Background(), ns); err != nil {
				t.Fatal(err)
			}
		}, "does not grant namespace ns"},
		{"network deleted", func(t *testing.T, c client.Client) {
			if err := c.Delete(context.Background(), &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "one"}}); err != nil {
				t.Fatal(err)
			}
		}, "being deleted"},
		{"network refused", func(t *testing.T, c client.Client) {
			pn := &berthv1alpha1.PodNetwork{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "one"}, pn); err != nil {
				t.Fatal(err)
			}
			meta.SetStatusCondition(&pn.Status.Conditions, metav1.Condition{Type: berthv1alpha1.ConditionAccepted, Status: metav1.ConditionFalse, Reason: ReasonRefused, Message: "spec.cidr: overlaps"})
			if err := c.Status().Update(context.Background(), pn); err != nil {
				t.Fatal(err)
			}
		}, "not accepted: spec.cidr: overlaps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, c := newReconciler(t, t0.Add(time.Hour), pcAt("cfg", t0, "one"), pod("p", "n1", map[string]string{"app": "cnf"}),
				acceptedNetwork("one", "berth1", "192.168.1.0/24"))
			reconcileAll(t, r, "cfg")
			if got := get(t, c, "cfg"); len(got.Status.Pods) != 1 || got.Status.Pods[0].State != berthv1alpha1.AttachmentAllocated ||
				got.Status.Pods[0].Network != "one" || got.Status.Pods[0].Bridge != "berth1" {
				t.Fatalf("want one Allocated entry on network one (berth1), got %+v", got.Status.Pods)
			}
			tc.unbind(t, c)
			reconcileAll(t, r, "cfg")
			got := get(t, c, "cfg")
			if len(got.Status.Pods) != 1 || got.Status.Pods[0].State != berthv1alpha1.AttachmentRemoving {
				t.Fatalf("want the entry Removing, got %+v", got.Status.Pods)
			}
			d := meta.FindStatusCondition(got.Status.Conditions, berthv1alpha1.ConditionDegraded)
			if got.Status.Phase != berthv1alpha1.PodConfigFailed || d == nil || d.Reason != ReasonInvalidSpec ||
				!strings.Contains(d.Message, "spec.networkAttachments[0].network") || !strings.Contains(d.Message, tc.wantMsg) {
				t.Fatalf("want phase Failed and Degraded naming spec.networkAttachments[0].network with %q, got %s %+v", tc.wantMsg, got.Status.Phase, d)
			}
			pool := &berthv1alpha1.IPAllocation{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "one"}, pool); err != nil || len(pool.Spec.Allocations) != 1 {
				t.Fatalf("the address must stay held until the agent confirms removal: %v %+v", err, pool.Spec.Allocations)
			}
		})
	}
}

// A PodConfig naming another tenant's network claims nothing: no entry, no address.
func TestNotGrantedAllocatesNothing(t *testing.T) {
	other := acceptedNetwork("red", "berth-red", "192.168.9.0/24")
	other.Spec.NamespaceSelector = metav1.LabelSelector{MatchLabels: map[string]string{"team": "red"}}
	r, c := newReconciler(t, t0.Add(time.Hour), pcAt("cfg", t0, "red"), pod("p", "n1", map[string]string{"app": "cnf"}), other)
	reconcileAll(t, r, "cfg")
	got := get(t, c, "cfg")
	if len(got.Status.Pods) != 0 || got.Status.Phase != berthv1alpha1.PodConfigFailed {
		t.Fatalf("want no entries and phase Failed, got %s %+v", got.Status.Phase, got.Status.Pods)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "red"}, &berthv1alpha1.IPAllocation{}); err == nil {
		t.Fatal("a pool was created for a network that does not grant the namespace")
	}
}

// A refused PodConfig claims no interface name: a newer valid one on the same pods gets it.
func TestRefusedClaimsNoInterface(t *testing.T) {
	refused := pcAt("first", t0, "missing")
	newer := pcAt("second", t0.Add(time.Minute), "one")
	r, c := newReconciler(t, t0.Add(time.Hour), refused, newer, pod("p", "n1", map[string]string{"app": "cnf"}),
		acceptedNetwork("one", "berth1", "192.168.1.0/24"))
	reconcileAll(t, r, "first", "second")
	if got := get(t, c, "first"); got.Status.Phase != berthv1alpha1.PodConfigFailed {
		t.Fatalf("first: want refused, got %+v", got.Status)
	}
	got := get(t, c, "second")
	if len(got.Status.Pods) != 1 || got.Status.Pods[0].State != berthv1alpha1.AttachmentAllocated {
		t.Fatalf("second: want its attachment allocated, got %+v", got.Status.Pods)
	}
}
