package controller

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
	"github.com/berth-sched/berth/pkg/podconfig/ipam"
)

// PodNetwork condition reasons.
const (
	ReasonAccepted = "Accepted"
	ReasonRefused  = "Refused"
	ReasonInUse    = "AddressesInUse"
	// ReasonReleased: accepted, its pool exists and every address of it was released.
	ReasonReleased = "Released"
	// ReasonIdle: accepted, no address was ever allocated from it.
	ReasonIdle = "Idle"
	// ReasonNoPodRange: refused because the cluster's pod range is unknown (no node has a
	// podCIDR, no cluster CIDR configured); see podconfig.NoPodRangeMessage.
	ReasonNoPodRange      = "PodRangeUnknown"
	EventNetworkRefused   = "NetworkRefused"
	EventNetworkAccepted  = "NetworkAccepted"
	reasonNetworkDeleting = "Deleting"
)

// NetworkReconciler decides every PodNetwork (accepted or refused, naming the field and the
// rule) and holds each one, through its finalizer, until no address of it is allocated. It is
// the only writer of PodNetwork status and the only one that deletes IPAllocations.
type NetworkReconciler struct {
	Client client.Client
	// APIReader lists ServiceCIDRs (read once per decision, not cached: they change rarely).
	// Nodes are read from Client's cache: a watch on them re-decides every network when a
	// node's addresses or pod ranges change.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Policy    podconfig.Policy
	// Recheck (default DefaultNetworkRecheck): see DefaultNetworkRecheck.
	Recheck time.Duration
}

// SetupWithManager registers the controller. Any PodNetwork change may change the decision
// of every other (a refused or deleted older network frees its bridge and range), so every
// event enqueues every network; so does a node that comes, goes, or changes its addresses or
// pod ranges (a network that was clear of every node may now hold one's address);
// IPAllocations map to their network (the finalizer waits on them).
func (r *NetworkReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("podnetwork").
		For(&berthv1alpha1.PodNetwork{}).
		Watches(&berthv1alpha1.PodNetwork{}, handler.EnqueueRequestsFromMapFunc(r.allNetworks)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allNetworks), builder.WithPredicates(nodeAddressingChanged)).
		Watches(&berthv1alpha1.IPAllocation{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetName()}}}
		})).
		Complete(r)
}

func (r *NetworkReconciler) allNetworks(ctx context.Context, _ client.Object) []reconcile.Request {
	var list berthv1alpha1.PodNetworkList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}})
	}
	return out
}

// Reconcile decides one PodNetwork: load (every network, the discovered ranges, its pool) →
// decide (Policy.AcceptNetworks, pure) → apply (finalizer, pool deletion) → status.
func (r *NetworkReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pn := &berthv1alpha1.PodNetwork{}
	if err := r.Client.Get(ctx, req.NamespacedName, pn); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !pn.DeletionTimestamp.IsZero()
	if !deleting && !controllerutil.ContainsFinalizer(pn, berthv1alpha1.PodNetworkFinalizer) {
		controllerutil.AddFinalizer(pn, berthv1alpha1.PodNetworkFinalizer)
		if err := r.Client.Update(ctx, pn); err != nil {
			return conflictRequeue(err)
		}
	}
	pool := &berthv1alpha1.IPAllocation{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pn.Name}, pool); apierrors.IsNotFound(err) {
		pool = nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	used := int64(0)
	if pool != nil {
		used = int64(len(pool.Spec.Allocations))
	}
	if deleting {
		return r.finalize(ctx, pn, pool, used)
	}
	refused, err := r.refusals(ctx, pn)
	if err != nil {
		return reconcile.Result{}, err
	}
	status := networkStatus(pn, refused, used, pool != nil)
	if len(refused) > 0 && conditionMsg(pn.Status.Conditions, berthv1alpha1.ConditionAccepted) != conditionMsg(status.Conditions, berthv1alpha1.ConditionAccepted) {
		r.event(pn, corev1.EventTypeWarning, EventNetworkRefused, "%s", conditionMsg(status.Conditions, berthv1alpha1.ConditionAccepted))
	}
	res, err := conflictRequeue(r.writeStatus(ctx, pn, status))
	if err == nil && res.RequeueAfter == 0 {
		// A new ServiceCIDR comes without any event this controller watches (nodes are
		// watched): every decision is taken again after a while.
		res.RequeueAfter = r.recheck()
	}
	return res, err
}

// finalize takes a deleted network's finalizer off once its pool (used addresses) is empty and
// gone.
func (r *NetworkReconciler) finalize(ctx context.Context, pn *berthv1alpha1.PodNetwork, pool *berthv1alpha1.IPAllocation, used int64) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(pn, berthv1alpha1.PodNetworkFinalizer) {
		return reconcile.Result{}, nil
	}
	if used > 0 {
		// PodConfigs bound to it see it deleting and move their entries to Removing;
		// each freed address brings an IPAllocation event back here.
		return conflictRequeue(r.writeStatus(ctx, pn, r.deletingStatus(pn, used)))
	}
	if pool != nil {
		// Deleted only if still empty on the API server (a resourceVersion precondition),
		// and confirmed gone before the finalizer goes: a pool left behind would hand its
		// addresses to a network re-created under the same name.
		alloc := &ipam.Allocator{Client: r.Client, Reader: r.APIReader}
		if err := alloc.DeleteIfEmpty(ctx, pn.Name); err != nil {
			return reconcile.Result{}, err
		}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: pn.Name}, &berthv1alpha1.IPAllocation{}); !apierrors.IsNotFound(err) {
			return reconcile.Result{RequeueAfter: time.Second}, client.IgnoreNotFound(err)
		}
	}
	controllerutil.RemoveFinalizer(pn, berthv1alpha1.PodNetworkFinalizer)
	return conflictRequeue(r.Client.Update(ctx, pn))
}

// refusals decides pn against every network and the addresses the cluster already uses: why
// it is refused, nothing when it is accepted.
func (r *NetworkReconciler) refusals(ctx context.Context, pn *berthv1alpha1.PodNetwork) (field.ErrorList, error) {
	var all berthv1alpha1.PodNetworkList
	if err := r.Client.List(ctx, &all); err != nil {
		return nil, err
	}
	// why an error and not a decision: without the nodes' addresses a network holding one
	// would be accepted, and a flaky read must not refuse (and tear down) every network either.
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes (their addresses decide every network): %w", err)
	}
	if !podconfig.HasPodCIDR(nodes.Items) && len(r.Policy.ClusterCIDRs) == 0 {
		// No pod range known: a network inside it would hand out pods' addresses (and nodes'
		// on clusters whose nodes live there), so nothing is accepted until the administrator
		// says where it is.
		return podconfig.NoPodRange(), nil
	}
	// A network being deleted still owns its bridge and range on the nodes until its
	// finalizer goes: it stays in the decision, so no newer network takes them meanwhile.
	reserved := r.Policy.Reserved(append(r.discover(ctx, nodes.Items), podconfig.NodeAddresses(nodePointers(nodes.Items))...))
	return r.Policy.AcceptNetworks(all.Items, reserved)[pn.Name], nil
}

// DefaultNetworkRecheck is how often a network is decided again without an event, so a range
// that appears in the cluster unwatched (a ServiceCIDR) refuses it in time.
const DefaultNetworkRecheck = time.Minute

func (r *NetworkReconciler) recheck() time.Duration {
	if r.Recheck > 0 {
		return r.Recheck
	}
	return DefaultNetworkRecheck
}

// discover returns the cluster's own ranges the API tells: ServiceCIDR objects (the service
// ranges the API server allocates from) and every node's podCIDRs. A ServiceCIDR failure is
// logged and the configured ranges still apply: discovery refines the policy, it never stops it.
func (r *NetworkReconciler) discover(ctx context.Context, nodes []corev1.Node) []podconfig.NamedPrefix {
	logger := log.FromContext(ctx)
	var out []podconfig.NamedPrefix
	var svc networkingv1.ServiceCIDRList
	if err := r.APIReader.List(ctx, &svc); err != nil {
		logger.V(1).Info("ServiceCIDRs not discovered; the configured cluster CIDRs apply", "error", err.Error())
	}
	for _, s := range svc.Items {
		for _, c := range s.Spec.CIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, podconfig.NamedPrefix{Prefix: p.Masked(), Name: "the service range (ServiceCIDR " + s.Name + ")"})
			}
		}
	}
	for _, n := range nodes {
		for _, c := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, podconfig.NamedPrefix{Prefix: p.Masked(), Name: "the pod range of node " + n.Name})
			}
		}
	}
	return out
}

// networkStatus is pn's status for a decision. Ready says how the accepted network is used:
// AddressesInUse with the count, Released once every address of its pool went back (the pool
// outlives its addresses, held by the network's finalizer), Idle when nothing was allocated.
func networkStatus(pn *berthv1alpha1.PodNetwork, refused field.ErrorList, used int64, hasPool bool) berthv1alpha1.PodNetworkStatus {
	s := berthv1alpha1.PodNetworkStatus{ObservedGeneration: pn.Generation, Used: used,
		Conditions: append([]metav1.Condition(nil), pn.Status.Conditions...)}
	accepted := metav1.Condition{Type: berthv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: ReasonAccepted,
		Message: "PodConfigs of the selected namespaces may attach", ObservedGeneration: pn.Generation}
	ready := metav1.Condition{Type: berthv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonInUse,
		Message: fmt.Sprintf("%d addresses in use", used), ObservedGeneration: pn.Generation}
	switch {
	case used > 0:
	case hasPool:
		ready.Reason, ready.Message = ReasonReleased, "0 addresses in use: every address was released"
	default:
		ready.Reason, ready.Message = ReasonIdle, "0 addresses in use: none allocated yet"
	}
	if len(refused) > 0 {
		accepted.Status, accepted.Reason = metav1.ConditionFalse, ReasonRefused
		if len(refused) == 1 && refused[0].Detail == podconfig.NoPodRangeMessage {
			accepted.Reason = ReasonNoPodRange
		}
		accepted.Message = truncate(podconfig.FormatErrors(refused.ToAggregate().Errors()))
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonRefused, "refused; binds no PodConfig"
	}
	meta.SetStatusCondition(&s.Conditions, accepted)
	meta.SetStatusCondition(&s.Conditions, ready)
	return s
}

func (r *NetworkReconciler) deletingStatus(pn *berthv1alpha1.PodNetwork, used int64) berthv1alpha1.PodNetworkStatus {
	s := *pn.Status.DeepCopy()
	s.Used = used
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: berthv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: reasonNetworkDeleting, ObservedGeneration: pn.Generation,
		Message: fmt.Sprintf("waiting for %d attachments to be removed before the network goes", used)})
	return s
}

func (r *NetworkReconciler) writeStatus(ctx context.Context, pn *berthv1alpha1.PodNetwork, s berthv1alpha1.PodNetworkStatus) error {
	if equality.Semantic.DeepEqual(s, pn.Status) {
		return nil
	}
	pn.Status = s
	return r.Client.Status().Update(ctx, pn)
}

func (r *NetworkReconciler) event(pn *berthv1alpha1.PodNetwork, typ, reason, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(pn, nil, typ, reason, "Validate", note, args...)
	}
}

func conditionMsg(cs []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(cs, t); c != nil {
		return c.Message
	}
	return ""
}

// nodeAddressingChanged passes the node events that can change a decision: a node added or
// deleted, or its addresses or pod ranges changed. Status heartbeats (conditions, images)
// would otherwise re-decide every network every few seconds per node.
var nodeAddressingChanged = predicate.Funcs{
	UpdateFunc: func(e crevent.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return o.Spec.PodCIDR != n.Spec.PodCIDR || !equality.Semantic.DeepEqual(o.Spec.PodCIDRs, n.Spec.PodCIDRs) ||
			!equality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses)
	},
}

func nodePointers(nodes []corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		out[i] = &nodes[i]
	}
	return out
}
