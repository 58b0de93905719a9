package rebalancer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// Round is everything one round decides from: the pool, the pods bound to its nodes, the load
// document and the moves still inside their cooldown.
type Round struct {
	Now   time.Time
	Round int64
	Nodes []*corev1.Node
	// Pods are the pool's non-terminal pods bound to its nodes.
	Pods  []*corev1.Pod
	Load  *Load
	Moves []berthv1alpha1.RebalancerMove
}

// NodeState is one node's verdict in a round.
type NodeState struct {
	Name  string
	Class Class
	// Why an unknown node is unknown, or why a hot node was not acted on.
	Why       string
	Usage     Usage
	HotRounds int
	Over      []Resource
	// Acting: hot for AnomalyRounds rounds and not held back.
	Acting bool
}

// Move is one eviction the planner decided.
type Move struct {
	Pod        *corev1.Pod
	FromNode   *corev1.Node
	Load       PodLoad
	From, To   string
	Resource   Resource
	FromUsage  Usage // the source node's usage when decided
	Threshold  float64
	HotRounds  int
	Projected  Usage // the source node after this move
	TargetNext Usage // the target node after this move
}

// Outcome is what the API server said to one eviction.
type Outcome string

// Outcomes (the berth_rebalancer_evictions_total result label).
const (
	Evicted     Outcome = "evicted"
	DryRunOK    Outcome = "dry_run"
	RefusedPDB  Outcome = "pdb_refused"
	OutcomeGone Outcome = "gone"
	Failed      Outcome = "error"
)

// Evictor carries out (or dry-runs) one move; an error stops the round (nothing further is
// evicted when, for example, the move could not be recorded first).
type Evictor func(ctx context.Context, m Move) (Outcome, error)

// SkippedPod is a candidate left in place, and why.
type SkippedPod struct {
	Namespace, Name, Node, Reason string
}

// Result is a round's decisions and outcomes.
type Result struct {
	Nodes            []NodeState
	Hot, Cold, Total int
	Unknown          int
	// Act is false when the round could not act; Why says why (a condition reason and message).
	Act       bool
	Reason    string
	Why       string
	Moves     []Move
	Outcomes  []Outcome
	Skipped   []SkippedPod
	Evictions int
	Refused   int
	// Requests: some candidate's use came from its requests (no per-pod measurement).
	Requests bool
}

// Condition reasons of the Active condition.
const (
	ReasonActing      = "Acting"
	ReasonNoNodes     = "NoNodesSelected"
	ReasonNothingHot  = "NoHotNodes"
	ReasonTooFewCold  = "TooFewColdNodes"
	ReasonNoMetrics   = "MetricsUnavailable"
	ReasonPaused      = "Paused"
	ReasonInvalidSpec = "InvalidSpec"
)

type target struct {
	node  *corev1.Node
	usage Usage
	alloc capacity
	pods  []*corev1.Pod
}

// Plan classifies the pool, chooses victims and calls evict for each, in order, within the
// limits. anomalies carries consecutive hot rounds from round to round.
func (p *Policy) Plan(ctx context.Context, in *Round, anomalies *Anomalies, fit *Fitter, evict Evictor) (*Result, error) {
	res := &Result{Total: len(in.Nodes)}
	if len(in.Nodes) == 0 {
		res.Reason, res.Why = ReasonNoNodes, "the node selector matches no node: nothing to balance"
		anomalies.Observe(nil)
		return res, nil
	}
	r := &planRun{Policy: p, in: in, fit: fit, evict: evict, res: res,
		byNode: map[string][]*corev1.Pod{}, nodeByName: map[string]*corev1.Node{}}
	for _, pod := range in.Pods {
		r.byNode[pod.Spec.NodeName] = append(r.byNode[pod.Spec.NodeName], pod)
	}
	for _, n := range in.Nodes {
		r.nodeByName[n.Name] = n
	}
	r.classify(anomalies)
	if !r.mayAct() {
		return res, nil
	}
	r.perNS, r.perOwner, r.ownerCool = map[string]int{}, map[string]int{}, p.cooledOwners(in)
	for _, st := range r.hottestFirst() {
		if err := r.drain(ctx, st); err != nil {
			return res, err
		}
	}
	return res, nil
}

// planRun is one Plan call: its inputs, the pool indexed, and the evictions counted so far
// against the limits.
type planRun struct {
	*Policy
	in    *Round
	fit   *Fitter
	evict Evictor
	res   *Result

	byNode     map[string][]*corev1.Pod
	nodeByName map[string]*corev1.Node
	targets    []*target

	perNS, perOwner map[string]int
	total           int
	ownerCool       map[string]bool
}

// classify gives each node its class and, for a hot one, whether it is acted on or why not.
// Cold nodes become the targets.
func (r *planRun) classify(anomalies *Anomalies) {
	in, res := r.in, r.res
	classes := map[string]Class{}
	states := make([]NodeState, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		l := in.Load.Nodes[n.Name]
		c, why, over := r.Classify(l, in.Now)
		st := NodeState{Name: n.Name, Class: c, Why: why, Over: over}
		if l != nil {
			st.Usage = l.Usage
		}
		classes[n.Name] = c
		states = append(states, st)
	}
	hotRounds := anomalies.Observe(classes)
	cooled := r.cooledNodes(in, r.byNode)
	lastFrom := lastMoveFrom(in.Moves)
	for i := range states {
		st := &states[i]
		st.HotRounds = hotRounds[st.Name]
		switch st.Class {
		case Unknown:
			res.Unknown++
		case Cold:
			res.Cold++
			n := r.nodeByName[st.Name]
			r.targets = append(r.targets, &target{node: n, usage: st.Usage, alloc: allocatable(n), pods: r.byNode[st.Name]})
		case Hot:
			if st.Why = r.heldBack(st, cooled[st.Name], lastFrom[st.Name]); st.Why == "" {
				st.Acting = true
				res.Hot++
			}
		}
	}
	res.Nodes = states
}

// lastMoveFrom is, per source node, the time of the newest real (not dry-run) move off it.
func lastMoveFrom(moves []berthv1alpha1.RebalancerMove) map[string]time.Time {
	lastFrom := map[string]time.Time{}
	for _, m := range moves {
		if !m.DryRun && m.Time.Time.After(lastFrom[m.From]) {
			lastFrom[m.From] = m.Time.Time
		}
	}
	return lastFrom
}

// heldBack says why a hot node is not acted on this round, or "" when it is.
func (r *planRun) heldBack(st *NodeState, cooledUntil, lastFrom time.Time) string {
	switch {
	case st.HotRounds < r.AnomalyRounds:
		return fmt.Sprintf("%s: hot %d of %d rounds", SkipAnomalyRounds, st.HotRounds, r.AnomalyRounds)
	case !cooledUntil.IsZero():
		return fmt.Sprintf("%s: until %s", SkipNodeCooldown, cooledUntil.UTC().Format(time.RFC3339))
	case !lastFrom.IsZero() && !r.in.Load.Nodes[st.Name].Updated.After(lastFrom):
		return SkipAwaitMetrics
	}
	return ""
}

// mayAct decides whether the round acts at all, and sets the result's reason either way.
func (r *planRun) mayAct() bool {
	p, in, res := r.Policy, r.in, r.res
	if in.Load.Newest.IsZero() || in.Now.Sub(in.Load.Newest) > p.Expiry {
		res.Reason, res.Why = ReasonNoMetrics, fmt.Sprintf("no node of the document has a sample newer than %s: the load signal is dead", p.Expiry)
		return false
	}
	switch {
	case res.Hot == 0:
		res.Reason, res.Why = ReasonNothingHot, fmt.Sprintf("no node above the high thresholds for %d rounds (%d cold, %d unknown of %d)", p.AnomalyRounds, res.Cold, res.Unknown, res.Total)
		return false
	case res.Cold <= p.MinColdNodes:
		res.Reason, res.Why = ReasonTooFewCold, fmt.Sprintf("%d hot nodes but only %d cold (more than %d needed)", res.Hot, res.Cold, p.MinColdNodes)
		return false
	}
	res.Act, res.Reason = true, ReasonActing
	res.Why = fmt.Sprintf("%d hot, %d cold, %d unknown of %d nodes", res.Hot, res.Cold, res.Unknown, res.Total)
	return true
}

// hottestFirst lists the acting nodes, the one furthest over a threshold first: it gets the
// cold capacity first.
func (r *planRun) hottestFirst() []*NodeState {
	acting := make([]*NodeState, 0, r.res.Hot)
	for i := range r.res.Nodes {
		if r.res.Nodes[i].Acting {
			acting = append(acting, &r.res.Nodes[i])
		}
	}
	sort.SliceStable(acting, func(i, j int) bool { return r.excess(acting[i]) > r.excess(acting[j]) })
	return acting
}

func (r *planRun) skip(pod *corev1.Pod, node, reason string) {
	r.res.Skipped = append(r.res.Skipped, SkippedPod{Namespace: pod.Namespace, Name: pod.Name, Node: node, Reason: reason})
}

// drain moves pods off one acting node, best candidate first, until it is projected under
// every high threshold or the candidates run out.
func (r *planRun) drain(ctx context.Context, st *NodeState) error {
	node := r.nodeByName[st.Name]
	var cands []PodLoad
	for _, pod := range r.byNode[st.Name] {
		if why := r.Ineligible(pod); why != "" {
			r.skip(pod, st.Name, why)
			continue
		}
		cands = append(cands, podLoad(pod, node, r.in.Load.Nodes[st.Name].Pods))
	}
	Order(cands, st.Over)
	projected := st.Usage
	moved := 0
	for _, c := range cands {
		over := r.overHigh(projected)
		if len(over) == 0 {
			break // stop as soon as the node is projected under every high threshold
		}
		if why := r.limited(c, moved); why != "" {
			r.skip(c.pod, st.Name, why)
			continue
		}
		t, why := r.pickTarget(ctx, r.fit, c, r.targets)
		if t == nil {
			r.skip(c.pod, st.Name, SkipNoFit)
			log.FromContext(ctx).V(1).Info("no cold node takes the pod", "pod", c.pod.Namespace+"/"+c.pod.Name, "why", why)
			continue
		}
		if !c.Measured {
			r.res.Requests = true
		}
		m := Move{Pod: c.pod, FromNode: node, Load: c, From: st.Name, To: t.node.Name, Resource: over[0], FromUsage: st.Usage,
			Threshold: r.High.of(over[0]), HotRounds: st.HotRounds, Projected: projected, TargetNext: t.usage}
		m.Projected.add(c.Percent, -1)
		m.TargetNext.add(t.alloc.percent(c.MilliCPU, c.MemoryBytes), 1)
		out, err := r.evict(ctx, m)
		if err != nil {
			return err
		}
		if r.record(m, out, c, t) {
			moved++
			projected = m.Projected
		}
	}
	return nil
}

// limited names the limit that keeps candidate c in place, or "" when none does; moved is
// how many pods its node gave up this round.
func (r *planRun) limited(c PodLoad, moved int) string {
	switch {
	case moved >= r.Limits.PerNode:
		return SkipNodeLimit
	case r.total >= r.Limits.PerRound:
		return SkipRoundLimit
	case r.perNS[c.pod.Namespace] >= r.Limits.PerNamespace:
		return SkipNamespaceLimit
	case r.perOwner[c.controllerUID] >= r.Limits.PerOwner:
		return SkipOwnerLimit
	case r.ownerCool[c.controllerUID]:
		return SkipOwnerCooldown
	}
	return ""
}

// record books move m's outcome; it reports whether the pod left (or would have, in a dry
// run), in which case the target now carries it.
func (r *planRun) record(m Move, out Outcome, c PodLoad, t *target) bool {
	res := r.res
	res.Moves = append(res.Moves, m)
	res.Outcomes = append(res.Outcomes, out)
	switch out {
	case Evicted, DryRunOK:
		res.Evictions++
		r.total++
		r.perNS[c.pod.Namespace]++
		r.perOwner[c.controllerUID]++
		t.usage = m.TargetNext
		t.pods = append(t.pods, c.pod)
		return true
	case RefusedPDB:
		res.Refused++
		r.skip(c.pod, m.From, SkipPDB)
	case OutcomeGone:
		r.skip(c.pod, m.From, SkipGone)
	default:
		r.skip(c.pod, m.From, SkipError)
	}
	return false
}

// excess is how far a node is over its thresholds, relative to them.
func (p *Policy) excess(st *NodeState) float64 {
	var m float64
	for _, r := range st.Over {
		if h := p.High.of(r); h > 0 {
			m = max(m, st.Usage.of(r)/h)
		} else {
			m = max(m, st.Usage.of(r)+1)
		}
	}
	return m
}

func (p *Policy) overHigh(u Usage) []Resource {
	var over []Resource
	for _, r := range p.High.named() {
		if u.of(r) > p.High.of(r) {
			over = append(over, r)
		}
	}
	return over
}

// pickTarget returns the coldest cold node (least projected use of the hot resources) that
// passes the Filter verdicts and stays under every high threshold with the pod's use added.
func (p *Policy) pickTarget(ctx context.Context, fit *Fitter, c PodLoad, targets []*target) (*target, string) {
	sorted := append([]*target(nil), targets...)
	sort.SliceStable(sorted, func(i, j int) bool {
		var a, b float64
		for _, r := range p.High.named() {
			a += sorted[i].usage.of(r)
			b += sorted[j].usage.of(r)
		}
		if a != b {
			return a < b
		}
		return sorted[i].node.Name < sorted[j].node.Name
	})
	var why []string
	for _, t := range sorted {
		next := t.usage
		next.add(t.alloc.percent(c.MilliCPU, c.MemoryBytes), 1)
		if over := p.overHigh(next); len(over) > 0 {
			why = append(why, fmt.Sprintf("%s: %s would reach %.0f%%", t.node.Name, over[0], next.of(over[0])))
			continue
		}
		if ok, reason := fit.Fits(ctx, c.pod, t.node, t.pods); !ok {
			why = append(why, t.node.Name+": "+reason)
			continue
		}
		return t, ""
	}
	return nil, strings.Join(why, "; ")
}

// cooledOwners are the controllers moved within the owner cooldown.
func (p *Policy) cooledOwners(in *Round) map[string]bool {
	out := map[string]bool{}
	for _, m := range in.Moves {
		if !m.DryRun && in.Now.Sub(m.Time.Time) < p.Limits.OwnerCooldown {
			out[m.OwnerUID] = true
		}
	}
	return out
}

// cooledNodes are the nodes that took a moved pod within the cooldown (a pod of a moved owner
// created after the move), each with the end of its cooldown: draining them would move the
// same load back and forth.
func (p *Policy) cooledNodes(in *Round, byNode map[string][]*corev1.Pod) map[string]time.Time {
	out := map[string]time.Time{}
	moved := map[string][]time.Time{}
	for _, m := range in.Moves {
		if !m.DryRun && in.Now.Sub(m.Time.Time) < p.Limits.OwnerCooldown {
			moved[m.OwnerUID] = append(moved[m.OwnerUID], m.Time.Time)
		}
	}
	if len(moved) == 0 {
		return out
	}
	for node, pods := range byNode {
		for _, pod := range pods {
			c := metav1.GetControllerOf(pod)
			if c == nil {
				continue
			}
			for _, t := range moved[string(c.UID)] {
				// The replacement is created after the eviction was requested; a second's
				// slack covers the API server's whole-second creation timestamps.
				if !pod.CreationTimestamp.Time.Before(t.Add(-time.Second)) {
					if until := t.Add(p.Limits.OwnerCooldown); until.After(out[node]) {
						out[node] = until
					}
				}
			}
		}
	}
	return out
}
