// Package controller holds the operator's PodNetwork and PodConfig controllers. The PodConfig
// controller binds each PodConfig's attachments to the PodNetworks that grant its namespace
// (podconfig.Bind), allocates an address for every
// attachment of every selected, scheduled pod (package ipam, persisted in IPAllocations),
// records per-pod entries the node agents complete, and frees addresses when pods, attachments
// or the PodConfig go. The node agents create the links; see ../README.md for the contract.
package controller

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
	"github.com/berth-sched/berth/pkg/podconfig/ipam"
)

// Condition reasons.
const (
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonAttachmentsFailed = "AttachmentsFailed"
	ReasonRemovalTimedOut   = "RemovalTimedOut"
	ReasonAsExpected        = "AsExpected"
	ReasonNoPods            = "NoPodsSelected"
	ReasonConfiguring       = "Configuring"
	ReasonConfigured        = "AllConfigured"
	ReasonDeleting          = "Deleting"
	EventNetworkExhausted   = "NetworkExhausted"
	EventInterfaceConflict  = "InterfaceConflict"
	EventRefused            = "Refused"
)

// DefaultRemovalTimeout is how long an entry may stay Removing on a node that is gone or not
// Ready before the operator gives up waiting for its agent.
const DefaultRemovalTimeout = 5 * time.Minute

// Reconciler reconciles PodConfigs.
type Reconciler struct {
	// Client reads from the manager's cache and writes (field owner berth-operator).
	Client client.Client
	// APIReader confirms, before an address is freed, that its pod is really gone (a cache
	// that has not seen a new pod yet must not free that pod's address).
	APIReader client.Reader
	Allocator *ipam.Allocator
	Recorder  events.EventRecorder
	// RemovalTimeout (default DefaultRemovalTimeout): see DefaultRemovalTimeout.
	RemovalTimeout time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// New returns a Reconciler wired to mgr.
func New(mgr ctrl.Manager, removalTimeout time.Duration) *Reconciler {
	c := client.WithFieldOwner(mgr.GetClient(), berthv1alpha1.PodConfigOperatorFieldManager)
	return &Reconciler{
		Client:         c,
		APIReader:      mgr.GetAPIReader(),
		Allocator:      &ipam.Allocator{Client: c, Reader: mgr.GetAPIReader()},
		Recorder:       mgr.GetEventRecorder(berthv1alpha1.PodConfigOperatorFieldManager),
		RemovalTimeout: removalTimeout,
	}
}

// SetupWithManager registers the controller. Pods, Namespaces, PodNetworks and IPAllocations
// map to the PodConfigs they concern: every PodConfig of the pod's namespace (a pod that stops
// matching must reach the PodConfig that still lists it), of a namespace whose labels changed
// (a grant may have come or gone), and every PodConfig naming a network whose PodNetwork or
// IPAllocation changed (a freed address lets an exhausted PodConfig retry).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("podconfig").
		For(&berthv1alpha1.PodConfig{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podConfigsOfPod)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.podConfigsOfNamespace)).
		Watches(&berthv1alpha1.PodNetwork{}, handler.EnqueueRequestsFromMapFunc(r.podConfigsOfNetwork)).
		Watches(&berthv1alpha1.IPAllocation{}, handler.EnqueueRequestsFromMapFunc(r.podConfigsOfNetwork)).
		Complete(r)
}

func (r *Reconciler) podConfigsOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	return r.podConfigsIn(ctx, o.GetNamespace())
}

func (r *Reconciler) podConfigsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.podConfigsIn(ctx, o.GetName())
}

func (r *Reconciler) podConfigsIn(ctx context.Context, ns string) []reconcile.Request {
	var list berthv1alpha1.PodConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

func (r *Reconciler) podConfigsOfNetwork(ctx context.Context, o client.Object) []reconcile.Request {
	var list berthv1alpha1.PodConfigList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		for j := range list.Items[i].Spec.NetworkAttachments {
			if list.Items[i].Spec.NetworkAttachments[j].Network == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				break
			}
		}
	}
	return out
}

type entryKey struct{ pod, attachment string }

type want struct {
	pod      *corev1.Pod
	att      *berthv1alpha1.NetworkAttachment
	network  podconfig.Network
	conflict string // non-empty: the interface name is claimed by an older PodConfig
}

// held is an address this PodConfig holds for one pod UID and attachment.
type held struct {
	network string
	addr    netip.Addr
	podName string
}

// Reconcile brings one PodConfig's allocations and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	pc := &berthv1alpha1.PodConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, pc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !pc.DeletionTimestamp.IsZero()
	if !deleting && !controllerutil.ContainsFinalizer(pc, berthv1alpha1.PodConfigFinalizer) {
		controllerutil.AddFinalizer(pc, berthv1alpha1.PodConfigFinalizer)
		if err := r.Client.Update(ctx, pc); err != nil {
			return conflictRequeue(err)
		}
	}
	if deleting && !controllerutil.ContainsFinalizer(pc, berthv1alpha1.PodConfigFinalizer) {
		return reconcile.Result{}, nil
	}

	s, err := r.load(ctx, pc)
	if err != nil {
		return reconcile.Result{}, err
	}
	p := decide(s)
	results, err := r.apply(ctx, s, p)
	if err != nil {
		return reconcile.Result{}, err
	}
	entries, failures, events := entriesOf(s, p, results)
	for _, ev := range events {
		r.event(pc, corev1.EventTypeWarning, ev.reason, ev.action, "%s", ev.note)
	}
	status := r.status(pc, s.refused, entries, s.podCount, failures, p.timedOut, deleting)
	if len(p.timedOut) > 0 {
		r.event(pc, corev1.EventTypeWarning, ReasonRemovalTimedOut, "Release",
			"freed addresses without the agent's confirmation after %s: %s", s.timeout, strings.Join(p.timedOut, "; "))
	}
	if len(s.refused) > 0 && conditionMessage(pc.Status, berthv1alpha1.ConditionDegraded) != conditionMessage(status, berthv1alpha1.ConditionDegraded) {
		r.event(pc, corev1.EventTypeWarning, EventRefused, "Validate", "%s", conditionMessage(status, berthv1alpha1.ConditionDegraded))
	}
	if !equality.Semantic.DeepEqual(status, pc.Status) {
		pc.Status = status
		if err := r.Client.Status().Update(ctx, pc); err != nil {
			return conflictRequeue(err)
		}
		logger.V(1).Info("status updated", "phase", status.Phase, "pods", status.PodCount, "entries", len(status.Pods))
	}
	if deleting && len(entries) == 0 {
		if err := r.finish(ctx, pc); err != nil {
			return conflictRequeue(err)
		}
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: p.requeue}, nil
}

// desired lists, for every selected pod that is scheduled, not terminal and not being deleted,
// one entry per attachment. A pod gets its address once it is scheduled, before it runs: the
// agent can configure it as soon as its sandbox exists, and an address held a little early
// costs nothing.
func (r *Reconciler) desired(ctx context.Context, pc *berthv1alpha1.PodConfig, bound map[string]podconfig.Network, all []berthv1alpha1.PodConfig, none bool) (map[entryKey]want, int, error) {
	wants := map[entryKey]want{}
	if none {
		return wants, 0, nil
	}
	sel, err := podconfig.Selector(pc)
	if err != nil {
		return nil, 0, err // validated before: unreachable
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(pc.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, 0, err
	}
	// Older PodConfigs of the namespace: the first to claim an interface name on a pod keeps
	// it. A refused one claims nothing (its refusal is this controller's own condition).
	var older []*berthv1alpha1.PodConfig
	for i := range all {
		o := &all[i]
		if d := meta.FindStatusCondition(o.Status.Conditions, berthv1alpha1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue && d.Reason == ReasonInvalidSpec {
			continue
		}
		if o.Namespace == pc.Namespace && o.UID != pc.UID && podconfig.Older(o, pc) {
			older = append(older, o)
		}
	}
	count := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !eligible(p) {
			continue
		}
		count++
		for j := range pc.Spec.NetworkAttachments {
			a := &pc.Spec.NetworkAttachments[j]
			n, ok := bound[a.Name]
			if !ok {
				return nil, 0, fmt.Errorf("attachment %s is not bound", a.Name) // bind refused the PodConfig before: unreachable
			}
			wants[entryKey{p.Name, a.Name}] = want{pod: p, att: a, network: n, conflict: interfaceClaim(older, p, a.Name)}
		}
	}
	return wants, count, nil
}

func eligible(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.DeletionTimestamp.IsZero() &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func interfaceClaim(older []*berthv1alpha1.PodConfig, p *corev1.Pod, name string) string {
	for _, o := range older {
		sel, err := podconfig.Selector(o)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		for _, b := range o.Spec.NetworkAttachments {
			if b.Name == name {
				return fmt.Sprintf("interface %s is already claimed by PodConfig %s (older)", name, o.Name)
			}
		}
	}
	return ""
}

// holdings indexes the addresses pc holds, by pod UID and attachment, from the IPAllocation
// cache.
func (r *Reconciler) holdings(ctx context.Context, pc *berthv1alpha1.PodConfig) (map[entryKey][]held, error) {
	var list berthv1alpha1.IPAllocationList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	out := map[entryKey][]held{}
	for i := range list.Items {
		obj := &list.Items[i]
		for _, e := range obj.Spec.Allocations {
			if e.PodNamespace != pc.Namespace || e.PodConfig != pc.Name {
				continue
			}
			addr, err := netip.ParseAddr(e.Address)
			if err != nil {
				continue
			}
			k := entryKey{e.PodUID, e.Attachment}
			out[k] = append(out[k], held{network: obj.Name, addr: addr, podName: e.PodName})
		}
	}
	return out, nil
}

// podGone reports whether the pod (name, uid) no longer exists, asking the API server when the
// cache says so: freeing a live pod's address would give it to a second pod.
func (r *Reconciler) podGone(ctx context.Context, ns, name string, uid types.UID) (bool, error) {
	if name == "" {
		return true, nil
	}
	p := &corev1.Pod{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
	if err == nil && (uid == "" || p.UID == uid) {
		return false, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return uid != "" && p.UID != uid, nil
}

// nodeDead reports whether node is gone or not Ready: its agent cannot confirm a removal.
func (r *Reconciler) nodeDead(ctx context.Context, name string) (bool, string, error) {
	if name == "" {
		return true, "no node", nil
	}
	n := &corev1.Node{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, n)
	if apierrors.IsNotFound(err) {
		return true, "node deleted", nil
	}
	if err != nil {
		return false, "", err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return false, "", nil
			}
			return true, "node not Ready: " + c.Reason, nil
		}
	}
	return true, "node has no Ready condition", nil
}

// finish removes the finalizer once nothing is left. Empty IPAllocations are the PodNetwork
// controller's to delete (with their network).
func (r *Reconciler) finish(ctx context.Context, pc *berthv1alpha1.PodConfig) error {
	controllerutil.RemoveFinalizer(pc, berthv1alpha1.PodConfigFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, pc))
}

// bind loads what binding needs (the PodNetworks, the namespace's labels) and binds pc
// (podconfig.Bind, pure).
func (r *Reconciler) bind(ctx context.Context, pc *berthv1alpha1.PodConfig) (map[string]podconfig.Network, field.ErrorList, error) {
	var nets berthv1alpha1.PodNetworkList
	if err := r.Client.List(ctx, &nets); err != nil {
		return nil, nil, err
	}
	byName := make(map[string]*berthv1alpha1.PodNetwork, len(nets.Items))
	for i := range nets.Items {
		byName[nets.Items[i].Name] = &nets.Items[i]
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pc.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, err
	}
	bound, refused := podconfig.Bind(pc, func(n string) *berthv1alpha1.PodNetwork { return byName[n] }, ns.Labels)
	return bound, refused, nil
}

func (r *Reconciler) status(pc *berthv1alpha1.PodConfig, refused field.ErrorList, entries []berthv1alpha1.PodAttachmentStatus, podCount int, failures, timedOut []string, deleting bool) berthv1alpha1.PodConfigStatus {
	s := berthv1alpha1.PodConfigStatus{
		ObservedGeneration: pc.Generation,
		PodCount:           int32(podCount),
		Pods:               entries,
		Conditions:         append([]metav1.Condition(nil), pc.Status.Conditions...),
	}
	configured := map[string]bool{}
	for _, e := range entries {
		if _, seen := configured[e.Pod]; !seen {
			configured[e.Pod] = true
		}
		if e.State != berthv1alpha1.AttachmentConfigured {
			configured[e.Pod] = false
		}
	}
	for _, ok := range configured {
		if ok {
			s.ConfiguredCount++
		}
	}
	ready := metav1.Condition{Type: berthv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: pc.Generation}
	degraded := metav1.Condition{Type: berthv1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonAsExpected,
		Message: "spec accepted", ObservedGeneration: pc.Generation}
	switch {
	case len(refused) > 0:
		s.Phase = berthv1alpha1.PodConfigFailed
		ready.Reason, ready.Message = ReasonInvalidSpec, "spec refused; nothing is allocated"
		degraded.Status, degraded.Reason = metav1.ConditionTrue, ReasonInvalidSpec
		degraded.Message = truncate(podconfig.FormatErrors(refused.ToAggregate().Errors()))
	case deleting:
		s.Phase = berthv1alpha1.PodConfigConfiguring
		ready.Reason, ready.Message = ReasonDeleting, fmt.Sprintf("removing links of %d attachments", len(entries))
	case len(failures) > 0:
		s.Phase = berthv1alpha1.PodConfigFailed
		ready.Reason, ready.Message = ReasonAttachmentsFailed, fmt.Sprintf("%d attachments failed", len(failures))
		degraded.Status, degraded.Reason = metav1.ConditionTrue, ReasonAttachmentsFailed
		degraded.Message = truncate(strings.Join(failures, "; "))
	case podCount == 0:
		s.Phase = berthv1alpha1.PodConfigPending
		ready.Reason, ready.Message = ReasonNoPods, "no selected pod is scheduled to a node"
	case int(s.ConfiguredCount) == podCount:
		s.Phase = berthv1alpha1.PodConfigConfigured
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, ReasonConfigured, fmt.Sprintf("%d pods configured", podCount)
	default:
		s.Phase = berthv1alpha1.PodConfigConfiguring
		ready.Reason, ready.Message = ReasonConfiguring, fmt.Sprintf("%d of %d pods configured", s.ConfiguredCount, podCount)
	}
	if len(timedOut) > 0 && len(refused) == 0 {
		degraded.Status, degraded.Reason = metav1.ConditionTrue, ReasonRemovalTimedOut
		degraded.Message = truncate("freed without the agent's confirmation (stale links may remain on the node): " + strings.Join(timedOut, "; "))
	} else if old := meta.FindStatusCondition(pc.Status.Conditions, berthv1alpha1.ConditionDegraded); degraded.Status == metav1.ConditionFalse &&
		old != nil && old.Reason == ReasonRemovalTimedOut && old.ObservedGeneration == pc.Generation {
		// A forced release is a lasting fact (links may remain on that node): it stays reported
		// until the spec changes, not only for the one reconcile that did it.
		degraded.Status, degraded.Reason, degraded.Message = old.Status, old.Reason, old.Message
	}
	meta.SetStatusCondition(&s.Conditions, ready)
	meta.SetStatusCondition(&s.Conditions, degraded)
	return s
}

func conditionMessage(s berthv1alpha1.PodConfigStatus, t string) string {
	if c := meta.FindStatusCondition(s.Conditions, t); c != nil {
		return c.Message
	}
	return ""
}

func stamp(e *berthv1alpha1.PodAttachmentStatus, old berthv1alpha1.PodAttachmentStatus, had bool, now time.Time) {
	if had && old.State == e.State && old.LastTransitionTime != nil {
		e.LastTransitionTime = old.LastTransitionTime
		return
	}
	if e.LastTransitionTime == nil || !had || old.State != e.State {
		e.LastTransitionTime = &metav1.Time{Time: now.Truncate(time.Second)}
	}
}

func (r *Reconciler) event(pc *berthv1alpha1.PodConfig, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(pc, nil, typ, reason, action, note, args...)
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) removalTimeout() time.Duration {
	if r.RemovalTimeout > 0 {
		return r.RemovalTimeout
	}
	return DefaultRemovalTimeout
}

func conflictRequeue(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		// Someone (an agent's report, another writer) changed the object since the cache
		// saw it: the watch brings the new version; look again shortly in any case.
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(err)
}

func minPositive(a, b time.Duration) time.Duration {
	if b <= 0 {
		return a
	}
	if a <= 0 || b < a {
		return b
	}
	return a
}

func truncate(s string) string {
	const max = 1024
	if len(s) > max {
		return s[:max-3] + "..."
	}
	return s
}

func sortedKeys[V any](m map[entryKey]V) []entryKey {
	keys := make([]entryKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].pod != keys[j].pod {
			return keys[i].pod < keys[j].pod
		}
		return keys[i].attachment < keys[j].attachment
	})
	return keys
}
