package grants

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// ManagedByLabel marks the Grants objects the operator writes (an administrator can tell them
// from anything else, and the chart's uninstall can select them).
const ManagedByLabel = "app.kubernetes.io/managed-by"

// Options configure the controllers.
type Options struct {
	// Networks lists PodNetworks in Grants: only when the operator also runs the PodConfig
	// controller, which decides them.
	Networks bool
}

// Setup checks that the API serves what the controllers read and write, then registers the
// Grants controller (one Grants object per granted namespace) and the InstanceClass status
// controller (its Granted condition) with mgr. Both run on the leader only, as every controller
// of the manager.
func Setup(mgr ctrl.Manager, o Options) error {
	kinds := []string{"Grants", "InstanceClass"}
	if o.Networks {
		kinds = append(kinds, "PodNetwork")
	}
	for _, kind := range kinds {
		gvk := berthv1alpha1.GroupVersion.WithKind(kind)
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return fmt.Errorf("the API server does not serve %s (install the chart's CRDs, charts/berth/crds): %w", gvk, err)
		}
	}
	cl := client.WithFieldOwner(mgr.GetClient(), berthv1alpha1.GrantsFieldManager)
	if err := (&Reconciler{Client: cl, Networks: o.Networks}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&ClassReconciler{Client: cl}).SetupWithManager(mgr)
}

// Reconciler keeps namespace NAME's Grants object (request key: the namespace's name). It is
// the only writer of Grants objects: it creates one where something is granted, keeps its
// status, and deletes it when nothing is granted any more.
type Reconciler struct {
	Client   client.Client
	Networks bool
}

// SetupWithManager registers the controller. A PodNetwork or InstanceClass change may change
// any namespace's grants (a selector, a list), so it enqueues every namespace; reads are from
// the cache and writes happen only on a difference, so the fan-out costs a walk of the cache.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("grants").
		For(&corev1.Namespace{}, builder.WithPredicates(namespaceChanged())).
		// An object someone else deleted or changed comes back as the operator computes it.
		Watches(&berthv1alpha1.Grants{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
		})).
		Watches(&berthv1alpha1.InstanceClass{}, handler.EnqueueRequestsFromMapFunc(r.allNamespaces),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if r.Networks {
		b = b.Watches(&berthv1alpha1.PodNetwork{}, handler.EnqueueRequestsFromMapFunc(r.allNamespaces),
			builder.WithPredicates(networkChanged()))
	}
	return b.Complete(r)
}

// namespaceChanged passes what can change a namespace's grants: its labels (PodNetwork
// selectors) and its deletion.
func namespaceChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
			!e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp())
	}}
}

// networkChanged passes a PodNetwork update only when what Grants shows of it (or its
// selector) changed: its status is rewritten on every allocation (Used), which must not walk
// every namespace.
func networkChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*berthv1alpha1.PodNetwork)
		n, ok2 := e.ObjectNew.(*berthv1alpha1.PodNetwork)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(grantedNetwork(o), grantedNetwork(n)) ||
			!equality.Semantic.DeepEqual(o.Spec.NamespaceSelector, n.Spec.NamespaceSelector)
	}}
}

func (r *Reconciler) allNamespaces(ctx context.Context, _ client.Object) []reconcile.Request {
	var list corev1.NamespaceList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}})
	}
	return out
}

// Reconcile brings namespace req.Name's Grants object to what the PodNetworks and
// InstanceClasses grant it.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: req.Name}, ns); apierrors.IsNotFound(err) {
		// The namespace's objects go with it.
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	cur := &berthv1alpha1.Grants{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: berthv1alpha1.GrantsName}, cur)
	if apierrors.IsNotFound(err) {
		cur = nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if !ns.DeletionTimestamp.IsZero() {
		// why nothing: the namespace's deletion removes the object, and a create there is refused.
		return reconcile.Result{}, nil
	}
	in := Input{Namespace: ns, NetworksListed: r.Networks}
	if r.Networks {
		var nets berthv1alpha1.PodNetworkList
		if err := r.Client.List(ctx, &nets); err != nil {
			return reconcile.Result{}, err
		}
		in.Networks = nets.Items
	}
	var classes berthv1alpha1.InstanceClassList
	if err := r.Client.List(ctx, &classes); err != nil {
		return reconcile.Result{}, err
	}
	in.Classes = classes.Items
	status, granted := Compute(in)
	if !granted {
		if cur == nil || !cur.DeletionTimestamp.IsZero() {
			return reconcile.Result{}, nil
		}
		// Preconditioned on the object read: a Grants object re-created meanwhile is decided again.
		err := r.Client.Delete(ctx, cur, client.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion})
		return requeueOnConflict(client.IgnoreNotFound(err))
	}
	if cur == nil {
		cur = &berthv1alpha1.Grants{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: berthv1alpha1.GrantsName,
			Labels: map[string]string{ManagedByLabel: berthv1alpha1.GrantsFieldManager}}}
		if err := r.Client.Create(ctx, cur); err != nil {
			return requeueOnConflict(err)
		}
	}
	// Keep the stored transition times of conditions that did not change.
	want := status
	want.Conditions = append([]metav1.Condition(nil), cur.Status.Conditions...)
	for _, c := range status.Conditions {
		meta.SetStatusCondition(&want.Conditions, c)
	}
	if equality.Semantic.DeepEqual(want, cur.Status) {
		return reconcile.Result{}, nil
	}
	cur.Status = want
	return requeueOnConflict(r.Client.Status().Update(ctx, cur))
}

// ClassReconciler writes each InstanceClass's Granted condition; it is that status's only
// writer (the webhook and the scheduler read the spec).
type ClassReconciler struct {
	Client client.Client
}

// SetupWithManager registers the controller: a namespace that appears or goes changes the
// condition of the classes that list it.
func (r *ClassReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("instanceclass").
		For(&berthv1alpha1.InstanceClass{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.classesListing),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Complete(r)
}

func (r *ClassReconciler) classesListing(ctx context.Context, o client.Object) []reconcile.Request {
	var list berthv1alpha1.InstanceClassList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		for _, n := range list.Items[i].Spec.Namespaces {
			if n == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}})
				break
			}
		}
	}
	return out
}

// Reconcile writes one InstanceClass's Granted condition.
func (r *ClassReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ic := &berthv1alpha1.InstanceClass{}
	if err := r.Client.Get(ctx, req.NamespacedName, ic); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var lookupErr error
	exists := func(name string) bool {
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
		if err != nil && !apierrors.IsNotFound(err) {
			lookupErr = err
		}
		return err == nil
	}
	cond := ClassGranted(ic, exists)
	if lookupErr != nil {
		return reconcile.Result{}, lookupErr
	}
	want := *ic.Status.DeepCopy()
	want.ObservedGeneration = ic.Generation
	meta.SetStatusCondition(&want.Conditions, cond)
	if equality.Semantic.DeepEqual(want, ic.Status) {
		return reconcile.Result{}, nil
	}
	ic.Status = want
	return requeueOnConflict(r.Client.Status().Update(ctx, ic))
}

// requeueOnConflict turns a conflict (the cache was behind the API server) into a requeue
// without an error log: the next reconcile reads the newer object.
func requeueOnConflict(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	return reconcile.Result{}, err
}
