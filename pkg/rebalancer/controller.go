// Package rebalancer is Berth's hot-spot relief: a controller of the operator that, every round,
// reads node and per-pod load from the load watcher (pkg/loadapi), classifies a node pool into
// hot, cold and unknown nodes, and evicts pods that berth-scheduler placed off nodes that stayed
// hot for several rounds, one at a time and within limits, when a cold node passes the
// scheduler's own Filter verdicts for them and stays under its high threshold with their use
// added. berth-scheduler then places them again on measured load. See README.md.
package rebalancer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// Name is the controller's name: the Events' reporting controller and the field manager.
const Name = "berth-rebalancer"

// Event reasons (kubectl berth explain reads them).
const (
	EventMoved       = "RebalancerMoved"
	EventWouldMove   = "RebalancerWouldMove"
	EventPDBRefused  = "RebalancerPDBRefused"
	EventNodeRelieve = "RebalancerRelieving"
)

// Reconciler runs the rounds of every Rebalancer.
type Reconciler struct {
	Client client.Client
	// APIReader lists nodes and pods straight from the API server once per round: caching every
	// pod of the cluster between rounds a minute apart would cost more than the list.
	APIReader client.Reader
	Recorder  events.EventRecorder
	HTTP      *http.Client
	// Protected namespaces are never touched besides kube-system (the operator's own).
	Protected []string
	Now       func() time.Time

	mu    sync.Mutex
	state map[string]*runState
	fit   *Fitter
}

// runState is what a Rebalancer keeps between rounds in memory: the anomaly counts (lost on a
// restart, which only delays action) and the eviction rate limiter.
type runState struct {
	anomalies Anomalies
	limiter   *rate.Limiter
	next      time.Time
}

// Setup registers the controller with the manager (leader-elected with the operator).
func Setup(mgr ctrl.Manager, protected []string) error {
	fit, err := NewFitter(context.Background())
	if err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(Name),
		HTTP: &http.Client{Timeout: 10 * time.Second, Transport: loadapi.NewTokenTransport(nil, loadapi.DefaultTokenFile())}, Protected: protected, fit: fit}
	return r.SetupWithManager(mgr)
}

// SetupWithManager watches Rebalancers; rounds are timed by RequeueAfter, so only spec changes
// (generation) wake it early.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	registerMetrics()
	if r.fit == nil {
		fit, err := NewFitter(context.Background())
		if err != nil {
			return err
		}
		r.fit = fit
	}
	if err := r.fit.WatchGrants(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("rebalancer").
		For(&berthv1alpha1.Rebalancer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) stateFor(name string) *runState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		r.state = map[string]*runState{}
	}
	s := r.state[name]
	if s == nil {
		s = &runState{}
		r.state[name] = s
	}
	return s
}

// Reconcile runs a round when one is due and schedules the next.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rb := &berthv1alpha1.Rebalancer{}
	if err := r.Client.Get(ctx, req.NamespacedName, rb); err != nil {
		if apierrors.IsNotFound(err) {
			r.mu.Lock()
			delete(r.state, req.Name)
			r.mu.Unlock()
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	st := r.stateFor(rb.Name)
	now := r.now()
	if rb.Status.ObservedGeneration == rb.Generation && now.Before(st.next) {
		return reconcile.Result{RequeueAfter: st.next.Sub(now)}, nil
	}
	pol, err := NewPolicy(&rb.Spec, r.Protected...)
	if err != nil {
		msg := "invalid spec, no rounds: " + err.Error()
		status := rb.Status.DeepCopy()
		setCond(status, rb.Generation, berthv1alpha1.RebalancerConditionActive, false, ReasonInvalidSpec, msg)
		roundsTotal.WithLabelValues(rb.Name, ReasonInvalidSpec).Inc()
		return reconcile.Result{}, r.writeStatus(ctx, rb, status)
	}
	st.next = now.Add(pol.Interval)
	if rb.Spec.Paused {
		status := rb.Status.DeepCopy()
		setCond(status, rb.Generation, berthv1alpha1.RebalancerConditionActive, false, ReasonPaused, "spec.paused: no rounds")
		return reconcile.Result{}, r.writeStatus(ctx, rb, status)
	}
	if lim := rate.Limit(pol.Limits.EvictionsPerSecond); st.limiter == nil || st.limiter.Limit() != lim {
		st.limiter = rate.NewLimiter(lim, 1)
	}
	if err := r.round(ctx, rb, pol, st); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: pol.Interval}, nil
}

// round runs one round and writes its status.
func (r *Reconciler) round(ctx context.Context, rb *berthv1alpha1.Rebalancer, pol *Policy, st *runState) error {
	now := r.now()
	status := rb.Status.DeepCopy()
	number := int64(1)
	if status.LastRound != nil {
		number = status.LastRound.Round + 1
	}
	status.Moves = keptMoves(status.Moves, now, pol)
	summary := &berthv1alpha1.RebalancerRound{Round: number, Time: metav1.NewTime(now), DryRun: pol.DryRun}
	status.LastRound = summary

	nodes, pods, err := r.pool(ctx, rb)
	if err != nil {
		return err
	}
	summary.Nodes = int32(len(nodes))
	load, err := Fetch(ctx, r.HTTP, rb.Spec.WatcherAddress, r.now)
	if err == nil && load.InvalidValues > 0 {
		watcherErrors.WithLabelValues(rb.Name, "invalid_values").Add(float64(load.InvalidValues))
	}
	if err != nil {
		return r.roundWithoutWatcher(ctx, rb, status, st, err)
	}
	in := &Round{Now: now, Round: number, Nodes: nodes, Pods: pods, Load: load, Moves: status.Moves}
	evict := func(ctx context.Context, m Move) (Outcome, error) {
		return r.evict(ctx, rb, status, number, pol, st, m)
	}
	res, err := pol.Plan(ctx, in, &st.anomalies, r.fitter(ctx), evict)
	if err != nil {
		return err
	}
	recordRound(rb.Name, res)
	// Writes made before each eviction replaced status's round block with a copy: this one is it.
	status.LastRound = summary
	summariseRound(status, rb.Generation, pol, in, res)
	logRound(ctx, pol, summary, res)
	return r.writeStatus(ctx, rb, status)
}

// fitter gives each profile's pods their profile's InstanceIsolation verdict, read from the
// configurations the operator rendered. What cannot be read falls back to the plugin's default
// args (logged): a round never stops for it.
func (r *Reconciler) fitter(ctx context.Context) *Fitter {
	profiles, problems, err := readProfiles(ctx, r.APIReader)
	if err != nil {
		log.FromContext(ctx).Info("scheduler profiles not read; InstanceIsolation checked with its default args", "err", err.Error())
		return r.fit
	}
	if len(problems) > 0 {
		log.FromContext(ctx).Info("some scheduler profiles not read; their pods checked with InstanceIsolation's default args", "problems", problems)
	}
	return r.fit.WithProfiles(ctx, profiles)
}

// keptMoves drops the moves past their cooldown; the rest are kept for the planner.
func keptMoves(moves []berthv1alpha1.RebalancerMove, now time.Time, pol *Policy) []berthv1alpha1.RebalancerMove {
	kept := moves[:0:0]
	for _, m := range moves {
		if now.Sub(m.Time.Time) < pol.Limits.OwnerCooldown || now.Sub(m.Time.Time) < pol.Expiry {
			kept = append(kept, m)
		}
	}
	return kept
}

// roundWithoutWatcher records a round whose load document could not be read: no action.
func (r *Reconciler) roundWithoutWatcher(ctx context.Context, rb *berthv1alpha1.Rebalancer, status *berthv1alpha1.RebalancerStatus, st *runState, err error) error {
	kind := "transport"
	var fe *FetchError
	if errors.As(err, &fe) {
		kind = fe.Kind
	}
	watcherErrors.WithLabelValues(rb.Name, kind).Inc()
	roundsTotal.WithLabelValues(rb.Name, ReasonNoMetrics).Inc()
	// The counts are forgotten: a node is hot only after consecutive rounds that saw it.
	st.anomalies.Observe(nil)
	msg := fmt.Sprintf("load watcher %s: %v; no action", rb.Spec.WatcherAddress, err)
	status.LastRound.Message = msg
	setCond(status, rb.Generation, berthv1alpha1.RebalancerConditionMetrics, false, "Watcher"+upperFirst(kind), msg)
	setCond(status, rb.Generation, berthv1alpha1.RebalancerConditionActive, false, ReasonNoMetrics, msg)
	log.FromContext(ctx).Info("round without action", "round", status.LastRound.Round, "reason", msg)
	return r.writeStatus(ctx, rb, status)
}

// summariseRound writes the planner's result into status: the round block and the Metrics and
// Active conditions.
func summariseRound(status *berthv1alpha1.RebalancerStatus, gen int64, pol *Policy, in *Round, res *Result) {
	summary := status.LastRound
	summary.HotNodes, summary.ColdNodes, summary.Unknown = int32(res.Hot), int32(res.Cold), int32(res.Unknown)
	summary.Evictions, summary.Refused = int32(res.Evictions), int32(res.Refused)
	summary.Usage = "measured"
	if res.Requests {
		summary.Usage = "requests"
	}
	summary.Message = res.Why
	if res.Act {
		summary.Message = fmt.Sprintf("%s; %d evictions, %d refused by a PodDisruptionBudget, %d pods left in place", res.Why, res.Evictions, res.Refused, len(res.Skipped))
	}
	if in.Load.Newest.IsZero() || in.Now.Sub(in.Load.Newest) > pol.Expiry {
		setCond(status, gen, berthv1alpha1.RebalancerConditionMetrics, false, "MetricsExpired", res.Why)
	} else {
		setCond(status, gen, berthv1alpha1.RebalancerConditionMetrics, true, "Fresh",
			fmt.Sprintf("%d of %d pool nodes with fresh metrics", len(in.Nodes)-res.Unknown, len(in.Nodes)))
	}
	reason := res.Reason
	if res.Act && pol.DryRun {
		reason = "DryRun"
	}
	setCond(status, gen, berthv1alpha1.RebalancerConditionActive, res.Act && !pol.DryRun, reason, summary.Message)
}

func logRound(ctx context.Context, pol *Policy, summary *berthv1alpha1.RebalancerRound, res *Result) {
	logger := log.FromContext(ctx)
	number := summary.Round
	logger.Info("round", "round", number, "dryRun", pol.DryRun, "reason", res.Reason, "hot", res.Hot, "cold", res.Cold, "unknown", res.Unknown,
		"evictions", res.Evictions, "refused", res.Refused, "usage", summary.Usage, "nodes", nodeSummary(res.Nodes), "skipped", skipSummary(res.Skipped))
	for i, m := range res.Moves {
		logger.Info("move", "round", number, "dryRun", pol.DryRun, "pod", m.Pod.Namespace+"/"+m.Pod.Name, "from", m.From, "fitsOn", m.To,
			"resource", m.Resource, "nodeUsage", fmt.Sprintf("%.1f", m.FromUsage.of(m.Resource)), "threshold", m.Threshold,
			"podUsage", fmt.Sprintf("%.1f", m.Load.Percent.of(m.Resource)), "measured", m.Load.Measured, "outcome", res.Outcomes[i])
	}
}

func (r *Reconciler) pool(ctx context.Context, rb *berthv1alpha1.Rebalancer) ([]*corev1.Node, []*corev1.Pod, error) {
	sel := labels.Everything()
	if rb.Spec.NodeSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(rb.Spec.NodeSelector)
		if err != nil {
			return nil, nil, reconcile.TerminalError(fmt.Errorf("spec.nodeSelector: %w", err))
		}
		sel = s
	}
	var nl corev1.NodeList
	if err := r.APIReader.List(ctx, &nl, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	nodes := make([]*corev1.Node, 0, len(nl.Items))
	in := map[string]bool{}
	for i := range nl.Items {
		nodes = append(nodes, &nl.Items[i])
		in[nl.Items[i].Name] = true
	}
	var pods []*corev1.Pod
	if len(nodes) == 0 {
		return nodes, nil, nil
	}
	opts := []client.ListOption{client.Limit(500)}
	for {
		var pl corev1.PodList
		if err := r.APIReader.List(ctx, &pl, opts...); err != nil {
			return nil, nil, fmt.Errorf("listing pods: %w", err)
		}
		for i := range pl.Items {
			p := &pl.Items[i]
			if in[p.Spec.NodeName] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				pods = append(pods, p)
			}
		}
		if pl.Continue == "" {
			break
		}
		opts = []client.ListOption{client.Limit(500), client.Continue(pl.Continue)}
	}
	return nodes, pods, nil
}

// evict records the move in the status first (so an operator restarted right after the request
// neither moves the owner again nor drains the node that took the pod), waits for the rate
// limiter, then asks the Eviction API (dryRun=All under spec.dryRun, so a PodDisruptionBudget
// still answers) and records Events.
func (r *Reconciler) evict(ctx context.Context, rb *berthv1alpha1.Rebalancer, status *berthv1alpha1.RebalancerStatus, round int64,
	pol *Policy, st *runState, m Move) (Outcome, error) {
	now := r.now()
	ctrlRef := metav1.GetControllerOf(m.Pod)
	rec := berthv1alpha1.RebalancerMove{Namespace: m.Pod.Namespace, Pod: m.Pod.Name, PodUID: string(m.Pod.UID),
		Owner: ctrlRef.Kind + "/" + ctrlRef.Name, OwnerUID: string(ctrlRef.UID), From: m.From, Round: round, Time: metav1.NewTime(now), DryRun: pol.DryRun}
	if !pol.DryRun {
		status.Moves = append(status.Moves, rec)
		if len(status.Moves) > 1000 {
			status.Moves = status.Moves[len(status.Moves)-1000:]
		}
		if err := r.writeStatus(ctx, rb, status); err != nil {
			return Failed, fmt.Errorf("recording the move of %s/%s before evicting it: %w", m.Pod.Namespace, m.Pod.Name, err)
		}
	}
	if err := st.limiter.Wait(ctx); err != nil {
		return Failed, err
	}
	uid := m.Pod.UID
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: m.Pod.Name, Namespace: m.Pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}}
	if pol.DryRun {
		ev.DeleteOptions.DryRun = []string{metav1.DryRunAll}
	}
	var opts []client.SubResourceCreateOption
	if pol.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	err := r.Client.SubResource("eviction").Create(ctx, m.Pod, ev, opts...)
	var out Outcome
	switch {
	case err == nil && pol.DryRun:
		out = DryRunOK
	case err == nil:
		out = Evicted
	case apierrors.IsTooManyRequests(err):
		out = RefusedPDB
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		out = OutcomeGone
	default:
		out = Failed
		log.FromContext(ctx).Error(err, "eviction failed", "pod", m.Pod.Namespace+"/"+m.Pod.Name)
	}
	if !pol.DryRun && out != Evicted {
		// Not moved: the owner is not in cooldown for it.
		for i := len(status.Moves) - 1; i >= 0; i-- {
			if status.Moves[i].PodUID == rec.PodUID && status.Moves[i].Round == round {
				status.Moves = append(status.Moves[:i], status.Moves[i+1:]...)
				break
			}
		}
	}
	r.record(m, round, pol, out, err)
	return out, nil
}

// record writes the Events of one move: on the pod (kubectl berth explain reads it) and on the
// node it left, naming the node's usage, the threshold and the round.
func (r *Reconciler) record(m Move, round int64, pol *Policy, out Outcome, err error) {
	if r.Recorder == nil {
		return
	}
	node := m.FromNode
	src := "measured"
	if !m.Load.Measured {
		src = "requests, no per-pod measurement"
	}
	why := fmt.Sprintf("round %d: node %s %s at %.0f%% above the high threshold %.0f%% for %d rounds; pod uses %.1f%% of the node (%s); %s fits on cold node %s (%s would be %.0f%%)",
		round, m.From, m.Resource, m.FromUsage.of(m.Resource), m.Threshold, m.HotRounds, m.Load.Percent.of(m.Resource), src,
		m.Pod.Name, m.To, m.Resource, m.TargetNext.of(m.Resource))
	reason, action := EventMoved, "Evict"
	typ := corev1.EventTypeNormal
	switch out {
	case DryRunOK:
		reason, action = EventWouldMove, "DryRunEvict"
	case RefusedPDB:
		reason, typ = EventPDBRefused, corev1.EventTypeWarning
		why = "a PodDisruptionBudget refused the eviction; " + why
	case Evicted:
	default:
		reason, typ = "RebalancerEvictionFailed", corev1.EventTypeWarning
		why = fmt.Sprintf("eviction %s (%v); %s", out, err, why)
	}
	r.Recorder.Eventf(m.Pod, node, typ, reason, action, "%s", trim(why))
	if out == Evicted || out == DryRunOK {
		r.Recorder.Eventf(node, m.Pod, typ, EventNodeRelieve, action, "%s", trim(fmt.Sprintf("pod %s/%s: %s", m.Pod.Namespace, m.Pod.Name, why)))
	}
}

// trim keeps a note under the Events API's 1 kB limit.
func trim(s string) string {
	if len(s) > 1000 {
		return s[:997] + "..."
	}
	return s
}

func (r *Reconciler) writeStatus(ctx context.Context, rb *berthv1alpha1.Rebalancer, status *berthv1alpha1.RebalancerStatus) error {
	status.ObservedGeneration = rb.Generation
	rb.Status = *status
	if err := r.Client.Status().Update(ctx, rb); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	*status = *rb.Status.DeepCopy()
	return nil
}

func setCond(s *berthv1alpha1.RebalancerStatus, gen int64, t string, ok bool, reason, msg string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason, Message: trim(msg), ObservedGeneration: gen})
}

func upperFirst(s string) string {
	parts := strings.Split(s, "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

func skipSummary(s []SkippedPod) map[string]int {
	out := map[string]int{}
	for _, x := range s {
		out[x.Reason]++
	}
	return out
}

func nodeSummary(ns []NodeState) string {
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		s := fmt.Sprintf("%s=%s(cpu %.0f%% mem %.0f%%", n.Name, n.Class, n.Usage.CPU, n.Usage.Memory)
		if n.Class == Hot {
			s += fmt.Sprintf(" %d rounds", n.HotRounds)
		}
		if n.Why != "" {
			s += " " + n.Why
		}
		out = append(out, s+")")
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
