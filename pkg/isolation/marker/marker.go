// Package marker is the single writer of the autoscaler-visible isolation marker (issue 37;
// pkg/isolation/webhook/README.md, "The autoscaler's view"): it keeps the node label
// classmarker.Key of every isolation pool node equal to the effective class of the classed
// pods running there, and removes it once a node has held none for a grace period, so an
// autoscaler (Karpenter, Cluster Autoscaler) simulating the webhook's node-affinity terms sees
// which class a node holds, and an emptied node carries nothing that keeps it alive.
//
// InstanceIsolation stays the authority: the marker follows bindings (the window between a
// binding and the write is the plugin's to guard) and is never read by the scheduler's filter.
package marker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

// Name is the controller's name (events' reporting controller, logs).
const Name = "isolation-marker"

// nodeIndex indexes cached pods by spec.nodeName (a name of its own, so no other controller's
// index on the same field conflicts with it).
const nodeIndex = "isolation-marker.spec.nodeName"

// EventClassesShareNode is the reason of the Warning Event on a node holding pods of several
// classes (a violation InstanceIsolation should have prevented).
const EventClassesShareNode = "InstanceClassesShareNode"

var (
	written = prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_isolation_markers_written_total",
		Help: "Isolation markers the operator set or changed on a node (label " + classmarker.Key + ")."})
	removed = prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_isolation_markers_removed_total",
		Help: "Isolation markers the operator removed from a node that held no classed pod for the grace period."})
	violations = prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_isolation_marker_shared_nodes_total",
		Help: "Times the marker writer found pods of several instance classes on one node (each a Warning Event on the node)."})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { crmetrics.Registry.MustRegister(written, removed, violations) })
}

// Reconciler keeps the marker of one node at a time.
type Reconciler struct {
	Client client.Client
	// Config is the webhook's: pool label and taint, class labels, exempt namespaces.
	Config webhook.Config
	// Grace is how long a node must hold no classed pod before its marker goes.
	Grace    time.Duration
	Recorder events.EventRecorder
	Now      func() time.Time

	mu sync.Mutex
	// start is when this writer began (first reconcile after leader election): a node whose
	// last classed pod left while no writer ran gets a full grace from here.
	start time.Time
	// lastSeen is when a classed pod was last seen on each node, or when the writer first saw
	// the node without one after seeing one (so the grace runs from the pod's leaving, not
	// from the last event before it). In memory: a restart counts from start instead, which
	// only keeps a marker longer, never shorter.
	lastSeen map[string]time.Time
	// held are the nodes whose last reconcile saw a classed pod.
	held map[string]bool
}

// Setup registers the writer with mgr (leader-elected with the operator, so one writer at a
// time): Nodes, Pods (indexed by node) and InstanceClasses (a grant changes pods' effective
// classes).
func Setup(mgr ctrl.Manager, c webhook.Config, grace time.Duration) error {
	registerMetrics()
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, nodeIndex, func(o client.Object) []string {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by node: %w", err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Config: c, Grace: grace, Recorder: mgr.GetEventRecorder(Name)}
	b := ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&corev1.Node{}, builder.WithPredicates(nodeChanged)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podNode), builder.WithPredicates(r.podChanged()))
	// why: without the CRD every class is its namespace's; the webhook tolerates that too.
	if _, err := mgr.GetRESTMapper().RESTMapping(berthv1alpha1.GroupVersion.WithKind("InstanceClass").GroupKind()); err == nil {
		b = b.Watches(&berthv1alpha1.InstanceClass{}, handler.EnqueueRequestsFromMapFunc(r.allNodes))
	} else if !meta.IsNoMatchError(err) {
		return fmt.Errorf("InstanceClass mapping: %w", err)
	}
	return b.Complete(r)
}

// nodeChanged: creation, deletion and changes of labels or taints (status heartbeats are not).
var nodeChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.Node)
	n, ok2 := e.ObjectNew.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	return !maps(o.Labels, n.Labels) || !slices.EqualFunc(o.Spec.Taints, n.Spec.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value })
}}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// podChanged passes events of pods on a node whose binding, phase, labels or deletion changed.
func (r *Reconciler) podChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return onNode(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool { return onNode(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Pod)
			n, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 {
				return true
			}
			return n.Spec.NodeName != "" && (o.Spec.NodeName != n.Spec.NodeName || o.Status.Phase != n.Status.Phase ||
				!maps(o.Labels, n.Labels) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil))
		},
		GenericFunc: func(e event.GenericEvent) bool { return onNode(e.Object) },
	}
}

func onNode(o client.Object) bool {
	p, ok := o.(*corev1.Pod)
	return ok && p.Spec.NodeName != ""
}

func (r *Reconciler) podNode(_ context.Context, o client.Object) []reconcile.Request {
	if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p.Spec.NodeName}}}
	}
	return nil
}

// allNodes re-examines every node holding the pool's membership or a marker: an InstanceClass
// changed which pods share a class.
func (r *Reconciler) allNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing nodes after an InstanceClass change")
		return nil
	}
	var out []reconcile.Request
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if _, marked := n.Labels[classmarker.Key]; marked || r.Config.PoolNode(n) != "" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
		}
	}
	return out
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Decision is what the writer does to one node.
type Decision struct {
	// Set is the marker value to write ("" none).
	Set string
	// Remove the marker now.
	Remove bool
	// Wait is how long until an unmarked-to-be node's grace ends (0: nothing to wait for).
	Wait time.Duration
	// Classes are the effective classes on the node when there are several (a violation).
	Classes []string
}

// Decide is the writer's rule for node, holding classes (the effective classes of its
// non-terminal classed pods), whose last classed pod was seen at since (the latest of its
// creation, the last classed pod seen there and the writer's start):
//   - exactly one class: the marker is that class's value (written if missing or different);
//   - none: the marker, if any, is removed once grace has passed since since;
//   - several: the label is left as it is, and the classes are reported.
func Decide(node *corev1.Node, classes []string, since, now time.Time, grace time.Duration) Decision {
	have, marked := node.Labels[classmarker.Key]
	switch len(classes) {
	case 1:
		if want := classmarker.MarkerValue(classes[0]); !marked || have != want {
			return Decision{Set: want}
		}
		return Decision{}
	case 0:
		if !marked {
			return Decision{}
		}
		if left := since.Add(grace).Sub(now); left > 0 {
			return Decision{Wait: left}
		}
		return Decision{Remove: true}
	}
	return Decision{Classes: classes}
}

// Classes are the effective classes of the classed pods running or about to run on a node,
// sorted: DaemonSet pods, mirror pods (owned by the Node), pods in exempt namespaces and pods
// that finished are not counted (as the webhook and InstanceIsolation leave them out).
func Classes(pods []corev1.Pod, c *webhook.Config, grants webhook.ClassGrants) ([]string, error) {
	set := map[string]struct{}{}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || slices.Contains(c.ExemptNamespaces, p.Namespace) ||
			slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" || o.Kind == "Node" }) {
			continue
		}
		_, class := firstClass(p.Labels, c.ClassLabels)
		if class == "" {
			continue
		}
		shared := false
		if grants != nil {
			ns, found, err := grants.Grant(class)
			if err != nil {
				return nil, err
			}
			shared = found && slices.Contains(ns, p.Namespace)
		}
		set[classmarker.Effective(p.Namespace, class, shared)] = struct{}{}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// firstClass is the pod's class: the first class label with a non-empty value (the webhook
// refuses pods whose class labels disagree, so the first is the class).
func firstClass(labels map[string]string, keys []string) (key, class string) {
	for _, k := range keys {
		if v := labels[k]; v != "" {
			return k, v
		}
	}
	return "", ""
}

// Reconcile brings one node's marker in line with Decide.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	now := r.now()
	r.mu.Lock()
	if r.start.IsZero() {
		r.start = now
	}
	if r.lastSeen == nil {
		r.lastSeen, r.held = map[string]time.Time{}, map[string]bool{}
	}
	start := r.start
	r.mu.Unlock()

	var node corev1.Node
	if err := r.Client.Get(ctx, req.NamespacedName, &node); err != nil {
		if apierrors.IsNotFound(err) {
			r.mu.Lock()
			delete(r.lastSeen, req.Name)
			delete(r.held, req.Name)
			r.mu.Unlock()
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if _, marked := node.Labels[classmarker.Key]; !marked && r.Config.PoolNode(&node) == "" {
		// why: classed pods only run on pool nodes; a node outside the pool without a marker has
		// nothing for this writer to do (one with a marker is handled: it must not keep it).
		return reconcile.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.MatchingFields{nodeIndex: node.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	var grants webhook.ClassGrants = webhook.CacheGrants{Reader: r.Client}
	classes, err := Classes(pods.Items, &r.Config, grants)
	if err != nil {
		return reconcile.Result{}, err
	}
	r.mu.Lock()
	if len(classes) > 0 || r.held[node.Name] {
		r.lastSeen[node.Name] = now
	}
	r.held[node.Name] = len(classes) > 0
	since := latest(node.CreationTimestamp.Time, r.lastSeen[node.Name], start)
	r.mu.Unlock()

	d := Decide(&node, classes, since, now, r.Grace)
	log := ctrl.LoggerFrom(ctx).WithValues("node", node.Name)
	switch {
	case d.Set != "":
		if err := r.patch(ctx, &node, &d.Set); err != nil {
			return reconcile.Result{}, err
		}
		written.Inc()
		log.Info("marker set", "class", classes[0], "value", d.Set)
	case d.Remove:
		if err := r.patch(ctx, &node, nil); err != nil {
			return reconcile.Result{}, err
		}
		removed.Inc()
		log.Info("marker removed: no classed pod on the node for the grace period", "grace", r.Grace)
	case d.Wait > 0:
		return reconcile.Result{RequeueAfter: d.Wait}, nil
	case len(d.Classes) > 1:
		violations.Inc()
		if r.Recorder != nil {
			r.Recorder.Eventf(&node, nil, corev1.EventTypeWarning, EventClassesShareNode, "Mark",
				"pods of instance classes %s run on this node; InstanceIsolation should have kept them apart (marker %s=%q left as it was)",
				strings.Join(d.Classes, ", "), classmarker.Key, node.Labels[classmarker.Key])
		}
		log.Info("several instance classes on one node; marker left as it was", "classes", d.Classes)
	}
	return reconcile.Result{}, nil
}

// patch sets the marker to *value, or removes it (value nil), with a JSON merge patch of that
// one label: the writer needs only `patch` on nodes and touches nothing else of the Node.
func (r *Reconciler) patch(ctx context.Context, node *corev1.Node, value *string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{classmarker.Key: value}}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("patching the marker of node %s: %w", node.Name, err)
	}
	return nil
}

func latest(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}
