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
	byNode := map[string][]*corev1.Pod{}
	for _, pod := range in.Pods {
		byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], pod)
	}
	classes := map[string]Class{}
	states := make([]NodeState, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		l := in.Load.Nodes[n.Name]
		c, why, over := p.Classify(l, in.Now)
		st := NodeState{Name: n.Name, Class: c, Why: why, Over: over}
		if l != nil {
			st.Usage = l.Usage
		}
		classes[n.Name] = c
		states = append(states, st)
	}
	hotRounds := anomalies.Observe(classes)
	cooled := p.cooledNodes(in, byNode)
	lastFrom := map[string]time.Time{}
	for _, m := range in.Moves {
		if !m.DryRun && m.Time.Time.After(lastFrom[m.From]) {
			lastFrom[m.From] = m.Time.Time
		}
	}
	var targets []*target
	nodeByName := map[string]*corev1.Node{}
	for _, n := range in.Nodes {
		nodeByName[n.Name] = n
	}
	for i := range states {
		st := &states[i]
		st.HotRounds = hotRounds[st.Name]
		switch st.Class {
		case Unknown:
			res.Unknown++
		case Cold:
			res.Cold++
			n := nodeByName[st.Name]
			targets = append(targets, &target{node: n, usage: st.Usage, alloc: allocatable(n), pods: byNode[st.Name]})
		case Hot:
			switch {
			case st.HotRounds < p.AnomalyRounds:
				st.Why = fmt.Sprintf("%s: hot %d of %d rounds", SkipAnomalyRounds, st.HotRounds, p.AnomalyRounds)
			case !cooled[st.Name].IsZero():
				st.Why = fmt.Sprintf("%s: until %s", SkipNodeCooldown, cooled[st.Name].UTC().Format(time.RFC3339))
			case !lastFrom[st.Name].IsZero() && !in.Load.Nodes[st.Name].Updated.After(lastFrom[st.Name]):
				st.Why = SkipAwaitMetrics
			default:
				st.Acting = true
				res.Hot++
			}
		}
	}
	res.Nodes = states
	if in.Load.Newest.IsZero() || in.Now.Sub(in.Load.Newest) > p.Expiry {
		res.Reason, res.Why = ReasonNoMetrics, fmt.Sprintf("no node of the document has a sample newer than %s: the load signal is dead", p.Expiry)
		return res, nil
	}
	switch {
	case res.Hot == 0:
		res.Reason, res.Why = ReasonNothingHot, fmt.Sprintf("no node above the high thresholds for %d rounds (%d cold, %d unknown of %d)", p.AnomalyRounds, res.Cold, res.Unknown, res.Total)
		return res, nil
	case res.Cold <= p.MinColdNodes:
		res.Reason, res.Why = ReasonTooFewCold, fmt.Sprintf("%d hot nodes but only %d cold (more than %d needed)", res.Hot, res.Cold, p.MinColdNodes)
		return res, nil
	}
	res.Act, res.Reason = true, ReasonActing
	res.Why = fmt.Sprintf("%d hot, %d cold, %d unknown of %d nodes", res.Hot, res.Cold, res.Unknown, res.Total)

	// Hottest first: the node furthest over a threshold gets the cold capacity first.
	acting := make([]*NodeState, 0, res.Hot)
	for i := range states {
		if states[i].Acting {
			acting = append(acting, &states[i])
		}
	}
	sort.SliceStable(acting, func(i, j int) bool { return p.excess(acting[i]) > p.excess(acting[j]) })

	ownerCool := p.cooledOwners(in)
	perNS, perOwner, total := map[string]int{}, map[string]int{}, 0
	skip := func(pod *corev1.Pod, node, reason string) {
		res.Skipped = append(res.Skipped, SkippedPod{Namespace: pod.Namespace, Name: pod.Name, Node: node, Reason: reason})
	}
	for _, st := range acting {
		node := nodeByName[st.Name]
		var cands []PodLoad
		for _, pod := range byNode[st.Name] {
			if why := p.Ineligible(pod); why != "" {
				skip(pod, st.Name, why)
				continue
			}
			cands = append(cands, podLoad(pod, node, in.Load.Nodes[st.Name].Pods))
		}
		Order(cands, st.Over)
		projected := st.Usage
		moved := 0
		for _, c := range cands {
			over := p.overHigh(projected)
			if len(over) == 0 {
				break // stop as soon as the node is projected under every high threshold
			}
			if moved >= p.Limits.PerNode {
				skip(c.pod, st.Name, SkipNodeLimit)
				continue
			}
			if total >= p.Limits.PerRound {
				skip(c.pod, st.Name, SkipRoundLimit)
				continue
			}
			if perNS[c.pod.Namespace] >= p.Limits.PerNamespace {
				skip(c.pod, st.Name, SkipNamespaceLimit)
				continue
			}
			if perOwner[c.controllerUID] >= p.Limits.PerOwner {
				skip(c.pod, st.Name, SkipOwnerLimit)
				continue
			}
			if ownerCool[c.controllerUID] {
				skip(c.pod, st.Name, SkipOwnerCooldown)
				continue
			}
			t, why := p.pickTarget(ctx, fit, c, targets)
			if t == nil {
				skip(c.pod, st.Name, SkipNoFit)
				log.FromContext(ctx).V(1).Info("no cold node takes the pod", "pod", c.pod.Namespace+"/"+c.pod.Name, "why", why)
				continue
			}
			if !c.Measured {
				res.Requests = true
			}
			r := over[0]
			next := projected
			next.add(c.Percent, -1)
			tnext := t.usage
			tnext.add(t.alloc.percent(c.MilliCPU, c.MemoryBytes), 1)
			m := Move{Pod: c.pod, FromNode: node, Load: c, From: st.Name, To: t.node.Name, Resource: r, FromUsage: st.Usage,
				Threshold: p.High.of(r), HotRounds: st.HotRounds, Projected: next, TargetNext: tnext}
			out, err := evict(ctx, m)
			if err != nil {
				return res, err
			}
			res.Moves = append(res.Moves, m)
			res.Outcomes = append(res.Outcomes, out)
			switch out {
			case Evicted, DryRunOK:
				res.Evictions++
				moved++
				total++
				perNS[c.pod.Namespace]++
				perOwner[c.controllerUID]++
				projected = next
				t.usage = tnext
				t.pods = append(t.pods, c.pod)
			case RefusedPDB:
				res.Refused++
				skip(c.pod, st.Name, SkipPDB)
			case OutcomeGone:
				skip(c.pod, st.Name, SkipGone)
			default:
				skip(c.pod, st.Name, SkipError)
			}
		}
	}
	return res, nil
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
