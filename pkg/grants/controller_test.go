package grants

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := berthv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&berthv1alpha1.Grants{}, &berthv1alpha1.InstanceClass{}, &berthv1alpha1.PodNetwork{}).Build()
}

func reconcileNS(t *testing.T, r *Reconciler, name string) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
}

func getGrants(t *testing.T, c client.Client, nsName string) *berthv1alpha1.Grants {
	t.Helper()
	g := &berthv1alpha1.Grants{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: nsName, Name: berthv1alpha1.GrantsName}, g)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestReconcileLifecycle walks one namespace through grant, change and revocation, and checks
// the neighbour's object is never touched.
func TestReconcileLifecycle(t *testing.T) {
	ctx := context.Background()
	blueNet := net("blue-net", map[string]string{"team": "blue"}, "accepted")
	gold := class("gold", "blue", "green")
	c := fakeClient(t, ns("blue", map[string]string{"team": "blue"}), ns("red", map[string]string{"team": "red"}), &blueNet, &gold)
	r := &Reconciler{Client: c, Networks: true}

	reconcileNS(t, r, "blue")
	reconcileNS(t, r, "red")
	g := getGrants(t, c, "blue")
	if g == nil || len(g.Status.Networks) != 1 || g.Status.Networks[0].Name != "blue-net" || len(g.Status.InstanceClasses) != 1 ||
		g.Status.InstanceClasses[0].SharedWith != 1 || g.Labels[ManagedByLabel] != berthv1alpha1.GrantsFieldManager {
		t.Fatalf("blue's grants = %+v", g)
	}
	if getGrants(t, c, "red") != nil {
		t.Fatal("red, granted nothing, got a Grants object")
	}
	first := meta.FindStatusCondition(g.Status.Conditions, berthv1alpha1.ConditionComplete)

	// A second reconcile with nothing changed writes nothing (no resourceVersion bump), so a
	// Grants watch never loops.
	rv := g.ResourceVersion
	reconcileNS(t, r, "blue")
	if g2 := getGrants(t, c, "blue"); g2.ResourceVersion != rv {
		t.Fatalf("an unchanged reconcile wrote the object (rv %s -> %s)", rv, g2.ResourceVersion)
	}

	// The class is withdrawn from blue: the network still grants, the class goes; Complete keeps
	// its transition time (its status did not change).
	gold.Spec.Namespaces = []string{"green"}
	if err := c.Update(ctx, &gold); err != nil {
		t.Fatal(err)
	}
	reconcileNS(t, r, "blue")
	g = getGrants(t, c, "blue")
	if len(g.Status.InstanceClasses) != 0 || len(g.Status.Networks) != 1 {
		t.Fatalf("after the class is withdrawn: %+v", g.Status)
	}
	if c2 := meta.FindStatusCondition(g.Status.Conditions, berthv1alpha1.ConditionComplete); !c2.LastTransitionTime.Equal(&first.LastTransitionTime) {
		t.Errorf("Complete's transition time moved without a transition: %v -> %v", first.LastTransitionTime, c2.LastTransitionTime)
	}

	// The namespace's label no longer matches: nothing is granted and the object goes.
	blue := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "blue"}, blue); err != nil {
		t.Fatal(err)
	}
	blue.Labels = map[string]string{"team": "none"}
	if err := c.Update(ctx, blue); err != nil {
		t.Fatal(err)
	}
	reconcileNS(t, r, "blue")
	if g := getGrants(t, c, "blue"); g != nil {
		t.Fatalf("an ungranted namespace kept its Grants: %+v", g)
	}
	// Reconciling a namespace that is gone is not an error.
	reconcileNS(t, r, "gone")
}

// TestReconcileRepairs: a Grants object someone else changed is put back as computed.
func TestReconcileRepairs(t *testing.T) {
	ctx := context.Background()
	open := net("open", map[string]string{}, "accepted")
	c := fakeClient(t, ns("blue", nil), &open)
	r := &Reconciler{Client: c, Networks: true}
	reconcileNS(t, r, "blue")
	g := getGrants(t, c, "blue")
	g.Status.Networks = append(g.Status.Networks, berthv1alpha1.GrantedNetwork{Name: "forged", CIDR: "10.0.0.0/8", State: berthv1alpha1.GrantedNetworkAccepted})
	if err := c.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	reconcileNS(t, r, "blue")
	if g := getGrants(t, c, "blue"); len(g.Status.Networks) != 1 || g.Status.Networks[0].Name != "open" {
		t.Fatalf("forged entry kept: %+v", g.Status.Networks)
	}
}

func TestClassReconcile(t *testing.T) {
	ctx := context.Background()
	gold := class("gold", "blue", "teal")
	c := fakeClient(t, ns("blue", nil), &gold)
	r := &ClassReconciler{Client: c}
	run := func() *berthv1alpha1.InstanceClass {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "gold"}}); err != nil {
			t.Fatal(err)
		}
		ic := &berthv1alpha1.InstanceClass{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gold"}, ic); err != nil {
			t.Fatal(err)
		}
		return ic
	}
	ic := run()
	cond := meta.FindStatusCondition(ic.Status.Conditions, berthv1alpha1.ConditionGranted)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonNamespacesMissing || ic.Status.ObservedGeneration != ic.Generation {
		t.Fatalf("with teal missing: %+v", ic.Status)
	}
	if err := c.Create(ctx, ns("teal", nil)); err != nil {
		t.Fatal(err)
	}
	ic = run()
	if cond := meta.FindStatusCondition(ic.Status.Conditions, berthv1alpha1.ConditionGranted); cond.Status != metav1.ConditionTrue {
		t.Fatalf("with teal created: %+v", cond)
	}
	// The mapping from a namespace event to the classes that list it.
	if got := r.classesListing(ctx, ns("teal", nil)); len(got) != 1 || got[0].Name != "gold" {
		t.Fatalf("classes listing teal = %v", got)
	}
	if got := r.classesListing(ctx, ns("red", nil)); len(got) != 0 {
		t.Fatalf("classes listing red = %v", got)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "absent"}}); err != nil {
		t.Fatalf("a deleted class: %v", err)
	}
}

// TestNetworkChanged: a PodNetwork's allocation count changes often and must not walk every
// namespace; what Grants shows of it must.
func TestNetworkChanged(t *testing.T) {
	base := net("n", map[string]string{"team": "blue"}, "accepted")
	used := base.DeepCopy()
	used.Status.Used = 7
	refused := base.DeepCopy()
	refused.Status.Conditions[0].Status = metav1.ConditionFalse
	relabel := base.DeepCopy()
	relabel.Spec.NamespaceSelector.MatchLabels = map[string]string{"team": "red"}
	mtu := int32(1300)
	withMTU := base.DeepCopy()
	withMTU.Spec.MTU = &mtu
	p := networkChanged()
	for _, tc := range []struct {
		name string
		new  *berthv1alpha1.PodNetwork
		want bool
	}{
		{"used count only", used, false},
		{"refused", refused, true},
		{"selector", relabel, true},
		{"mtu", withMTU, true},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: &base, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: passes %v, want %v", tc.name, got, tc.want)
		}
	}
}
