package controller

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

func newNetworkReconciler(t *testing.T, objs ...client.Object) (*NetworkReconciler, client.Client) {
	s := scheme(t)
	if err := networkingv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&berthv1alpha1.PodNetwork{}).Build()
	return &NetworkReconciler{Client: c, APIReader: c, Policy: podconfig.Policy{BridgePrefix: "berth",
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}}, c
}

func network(name string, age int, bridge, cidr string) *berthv1alpha1.PodNetwork {
	return &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))},
		Spec: berthv1alpha1.PodNetworkSpec{Bridge: bridge, CIDR: cidr}}
}

func reconcileNetworks(t *testing.T, r *NetworkReconciler, names ...string) {
	t.Helper()
	for round := 0; round < 2; round++ {
		for _, n := range names {
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: n}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The decision is written to status, naming the field and the rule, for ranges the API server
// alone knows (a ServiceCIDR, a node's podCIDR) as well as configured ones; refused networks
// claim nothing.
func TestNetworkDecisions(t *testing.T) {
	svc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.50.1.0/24"}}}
	cases := []struct {
		name     string
		nets     []*berthv1alpha1.PodNetwork
		accepted map[string]bool
		wantMsg  map[string]string
	}{
		{"accepted", []*berthv1alpha1.PodNetwork{network("a", 0, "berth-a", "192.168.1.0/24")}, map[string]bool{"a": true}, nil},
		{"service range discovered", []*berthv1alpha1.PodNetwork{network("a", 0, "berth-a", "10.96.3.0/24")}, map[string]bool{"a": false},
			map[string]string{"a": "spec.cidr: Forbidden: 10.96.3.0/24 overlaps the service range (ServiceCIDR kubernetes)"}},
		{"node podCIDR discovered", []*berthv1alpha1.PodNetwork{network("a", 0, "berth-a", "10.50.0.0/16")}, map[string]bool{"a": false},
			map[string]string{"a": "the pod range of node n1"}},
		{"configured cluster CIDR", []*berthv1alpha1.PodNetwork{network("a", 0, "berth-a", "10.244.7.0/24")}, map[string]bool{"a": false},
			map[string]string{"a": "the cluster's network 10.244.0.0/16"}},
		{"older keeps its bridge", []*berthv1alpha1.PodNetwork{network("a", 0, "berth-a", "192.168.1.0/24"), network("b", 1, "berth-a", "192.168.2.0/24")},
			map[string]bool{"a": true, "b": false}, map[string]string{"b": "spec.bridge: Forbidden: bridge berth-a belongs to PodNetwork a (older)"}},
		{"refused older squats nothing", []*berthv1alpha1.PodNetwork{network("a", 0, "berth-a", "10.96.0.0/24"), network("b", 1, "berth-a", "192.168.2.0/24")},
			map[string]bool{"a": false, "b": true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{svc, node}
			var names []string
			for _, n := range tc.nets {
				objs = append(objs, n)
				names = append(names, n.Name)
			}
			r, c := newNetworkReconciler(t, objs...)
			reconcileNetworks(t, r, names...)
			for _, name := range names {
				pn := &berthv1alpha1.PodNetwork{}
				if err := c.Get(context.Background(), client.ObjectKey{Name: name}, pn); err != nil {
					t.Fatal(err)
				}
				ok, why := podconfig.Accepted(pn)
				if ok != tc.accepted[name] || !strings.Contains(why, tc.wantMsg[name]) {
					t.Errorf("%s: accepted=%v (%q), want %v containing %q", name, ok, why, tc.accepted[name], tc.wantMsg[name])
				}
				if len(pn.Finalizers) != 1 || pn.Status.ObservedGeneration != 1 || meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionReady) == nil {
					t.Errorf("%s: want the finalizer, observedGeneration 1 and a Ready condition, got %+v %+v", name, pn.Finalizers, pn.Status)
				}
			}
		})
	}
}

// A network being deleted stays while any address of it is allocated (links may exist on
// nodes); then its pool goes, and then the network.
func TestNetworkDeletionWaitsForPool(t *testing.T) {
	pn := network("a", 0, "berth-a", "192.168.1.0/24")
	pn.Finalizers = []string{berthv1alpha1.PodNetworkFinalizer}
	pool := &berthv1alpha1.IPAllocation{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: berthv1alpha1.IPAllocationSpec{Master: "berth-a", CIDR: "192.168.1.0/24",
			Allocations: []berthv1alpha1.Allocation{{Address: "192.168.1.1", PodNamespace: "ns", PodName: "p", PodUID: "u", PodConfig: "cfg", Attachment: "net1"}}}}
	r, c := newNetworkReconciler(t, pn, pool)
	ctx := context.Background()
	if err := c.Delete(ctx, pn); err != nil {
		t.Fatal(err)
	}
	reconcileNetworks(t, r, "a")
	got := &berthv1alpha1.PodNetwork{}
	if err := c.Get(ctx, client.ObjectKey{Name: "a"}, got); err != nil {
		t.Fatalf("the network went with an address still allocated: %v", err)
	}
	if rd := meta.FindStatusCondition(got.Status.Conditions, berthv1alpha1.ConditionReady); rd == nil || rd.Reason != reasonNetworkDeleting || !strings.Contains(rd.Message, "1 attachments") {
		t.Fatalf("want Ready=False Deleting naming 1 attachment, got %+v", rd)
	}
	pool.Spec.Allocations = nil
	if err := c.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	reconcileNetworks(t, r, "a")
	if err := c.Get(ctx, client.ObjectKey{Name: "a"}, &berthv1alpha1.IPAllocation{}); !apierrors.IsNotFound(err) {
		t.Fatalf("want the empty pool deleted, got %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "a"}, &berthv1alpha1.PodNetwork{}); !apierrors.IsNotFound(err) {
		t.Fatalf("want the network gone, got %v", err)
	}
}

// A range that appears later (a node's podCIDR) refuses an accepted network on the next
// decision, which comes without any event the controller watches: every reconcile asks to be
// run again after the recheck period.
func TestNetworkRecheckedForNewRanges(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	r, c := newNetworkReconciler(t, network("a", 0, "berth-a", "10.250.3.0/24"), node)
	ctx := context.Background()
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "a"}})
	if err != nil || res.RequeueAfter != DefaultNetworkRecheck {
		t.Fatalf("reconcile: %v, requeue %v; want a recheck after %v", err, res.RequeueAfter, DefaultNetworkRecheck)
	}
	reconcileNetworks(t, r, "a")
	pn := &berthv1alpha1.PodNetwork{}
	_ = c.Get(ctx, client.ObjectKey{Name: "a"}, pn)
	if ok, why := podconfig.Accepted(pn); !ok {
		t.Fatalf("want accepted first, got %q", why)
	}
	node.Spec.PodCIDRs = []string{"10.250.3.0/24"}
	if err := c.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	reconcileNetworks(t, r, "a")
	_ = c.Get(ctx, client.ObjectKey{Name: "a"}, pn)
	if ok, why := podconfig.Accepted(pn); ok || !strings.Contains(why, "the pod range of node n1") {
		t.Fatalf("accepted=%v %q; want refused naming node n1's pod range", ok, why)
	}
}
