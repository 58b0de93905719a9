// Package targetloadpacking implements the TargetLoadPacking score plugin: it packs pods onto
// nodes until their real (measured) CPU utilisation reaches a target, and spreads beyond it.
package targetloadpacking

import (
	"context"
	"fmt"
	"math"

	"github.com/paypal/load-watcher/pkg/watcher"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
)

// Name is the plugin name, the same as upstream so existing configurations keep working.
const Name = "TargetLoadPacking"

// TargetLoadPacking scores nodes by predicted CPU utilisation against a target.
type TargetLoadPacking struct {
	args       *TargetLoadPackingArgs
	target     int64
	multiplier float64
	// margin is varianceMargin: standard deviations of the node's CPU window added to the
	// prediction (0: upstream's score).
	margin     float64
	defaultCPU int64
	engine     *loadaware.Engine
	// nodes finds a node by name for NormalizeScore's tie-break (the framework's snapshot).
	nodes fwk.NodeInfoLister
	// Hooks are PreFilter, Filter, Reserve and Unreserve: the engine's, as in every
	// load-aware plugin.
	loadaware.Hooks
}

var (
	_ fwk.ScorePlugin     = &TargetLoadPacking{}
	_ fwk.ScoreExtensions = &TargetLoadPacking{}
	_ fwk.PreScorePlugin  = &TargetLoadPacking{}
	_ fwk.FilterPlugin    = &TargetLoadPacking{}
	_ fwk.PreFilterPlugin = &TargetLoadPacking{}
	_ fwk.ReservePlugin   = &TargetLoadPacking{}
	// why: one Filter/Score plugin without SignPlugin turns the framework's opportunistic
	// batching off for the whole profile, and a burst of identical pods is then scored on
	// every node every cycle.
	_ fwk.SignPlugin = &TargetLoadPacking{}
)

// New is the scheduler framework factory. The refresh loop stops when ctx (the scheduler's)
// ends.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return NewWithOptions(ctx, obj, h, loadaware.Options{})
}

// NewWithOptions is New with test seams.
func NewWithOptions(ctx context.Context, obj runtime.Object, h fwk.Handle, opts loadaware.Options) (*TargetLoadPacking, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	m, _ := parseMultiplier(*args.DefaultRequestsMultiplier) // validated by ParseArgs
	margin, _ := parseMargin(*args.VarianceMargin)           // validated by ParseArgs
	cpu := args.DefaultRequests[v1.ResourceCPU]
	pl := &TargetLoadPacking{
		args:       args,
		target:     *args.TargetUtilization,
		multiplier: m,
		margin:     margin,
		defaultCPU: cpu.MilliValue(),
	}
	opts.UpstreamCPU = UpstreamCPU
	pl.engine, err = loadaware.NewEngine(ctx, Name, args.LoadAwareArgs, h, pl.estimate, opts)
	if err != nil {
		return nil, err
	}
	pl.Hooks = loadaware.HooksFor(pl.engine)
	if h != nil && h.SnapshotSharedLister() != nil {
		pl.nodes = h.SnapshotSharedLister().NodeInfos()
	}
	return pl, nil
}

// Name implements fwk.Plugin.
func (pl *TargetLoadPacking) Name() string { return Name }

// Engine exposes the snapshot and tracker (tests, debugging).
func (pl *TargetLoadPacking) Engine() *loadaware.Engine { return pl.engine }

// PredictedMilliCPU is the CPU a pod is expected to use: per container its CPU limit, else
// its CPU request × defaultRequestsMultiplier (rounded), else defaultRequests.cpu; plus the
// pod overhead. Sidecar (restartable init) containers run for the pod's life and count like
// containers; other init containers do not (they end before the others start).
func (pl *TargetLoadPacking) PredictedMilliCPU(pod *v1.Pod) int64 {
	var sum int64
	add := func(c *v1.Container) {
		if q, ok := c.Resources.Limits[v1.ResourceCPU]; ok {
			sum += q.MilliValue()
		} else if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
			sum += int64(math.Round(float64(q.MilliValue()) * pl.multiplier))
		} else {
			sum += pl.defaultCPU
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	if q, ok := pod.Spec.Overhead[v1.ResourceCPU]; ok {
		sum += q.MilliValue()
	}
	return sum
}

func (pl *TargetLoadPacking) estimate(pod *v1.Pod) loadaware.Estimate {
	mem := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceMemory]
	return loadaware.Estimate{MilliCPU: pl.PredictedMilliCPU(pod), MemoryBytes: mem.Value()}
}

const stateKey fwk.StateKey = Name + ".predictedMilliCPU"

// predictedCPU is the pod's predicted CPU, computed once per cycle in PreScore.
type predictedCPU struct {
	milli int64
}

func (p *predictedCPU) Clone() fwk.StateData { return p }

// PreScore predicts the pod's CPU once per cycle instead of once per node in Score, and scores
// the cycle's nodes through the engine's memo (only nodes whose load changed are computed), so
// Score only looks the result up.
func (pl *TargetLoadPacking) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	p := &predictedCPU{milli: pl.podMilliCPU(pod)}
	state.Write(stateKey, p)
	pl.engine.PrepareScores(state, nodes, [2]int64{p.milli}, func(st loadaware.NodeState, ni fwk.NodeInfo) int64 {
		return pl.score(st, ni.Node(), p.milli, nil)
	})
	return nil
}

func (pl *TargetLoadPacking) predictedFromState(state fwk.CycleState, pod *v1.Pod) int64 {
	if state != nil {
		if d, err := state.Read(stateKey); err == nil {
			if p, ok := d.(*predictedCPU); ok {
				return p.milli
			}
		}
	}
	// PreScore not enabled (score-only configuration): compute here.
	return pl.podMilliCPU(pod)
}

// podMilliCPU is the CPU the pod counts at: its workload's profile estimate when there is a
// usable one (one map lookup), else its namespace's ratio when usable, else PredictedMilliCPU.
func (pl *TargetLoadPacking) podMilliCPU(pod *v1.Pod) int64 {
	if m, ok := pl.engine.LearnedMilliCPU(pod); ok {
		return m
	}
	return pl.PredictedMilliCPU(pod)
}

// Score implements fwk.ScorePlugin. It reads memory only: the score PreScore prepared, or the
// node's load state.
func (pl *TargetLoadPacking) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	if s, ok := pl.engine.PreparedScore(state, nodeInfo); ok {
		return s, nil
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	return pl.score(pl.engine.NodeOf(node), node, pl.predictedFromState(state, pod), nil), nil
}

// ExplainScore is what a decision record shows for the node: the same score function over the
// load state the cycle scored the node from, with the terms written out.
func (pl *TargetLoadPacking) ExplainScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) any {
	node := nodeInfo.Node()
	if node == nil {
		return nil
	}
	var d decisionapi.LoadDetail
	pl.score(pl.engine.PreparedState(state, node), node, pl.predictedFromState(state, pod), &d)
	pl.engine.ExplainEstimate(pod, &d)
	return d
}

// score is TargetLoadPacking's one score path; with d it also writes the terms it used.
func (pl *TargetLoadPacking) score(st loadaware.NodeState, node *v1.Node, podMilli int64, d *decisionapi.LoadDetail) int64 {
	s, neutral := pl.exactScore(st, node, podMilli, d)
	if neutral {
		return pl.engine.NeutralScore()
	}
	return loadaware.RoundScore(s)
}

// exactScore is score before rounding, and whether it is the neutral score of a node whose
// load is unknown.
func (pl *TargetLoadPacking) exactScore(st loadaware.NodeState, node *v1.Node, podMilli int64, d *decisionapi.LoadDetail) (float64, bool) {
	if st.Freshness != loadaware.Fresh || !st.Metrics.CPU.Valid {
		// Unknown load is neither good nor bad: a neutral score, never an error.
		if d != nil {
			*d = pl.engine.Detail(st)
			d.Neutral = true
		}
		return float64(pl.engine.NeutralScore()), true
	}
	capacity := st.CapacityMilliCPU(node)
	u := PredictedUtilization(st.Metrics.CPU.Avg, capacity, podMilli+st.Unreported.MilliCPU)
	headroom := pl.margin * st.Metrics.CPU.Std
	u += headroom
	if d != nil {
		*d = pl.engine.Detail(st)
		d.MeasuredPercent, d.CapacityMilliCPU, d.PodMilliCPU = st.Metrics.CPU.Avg, capacity, podMilli
		d.PredictedPercent, d.TargetPercent, d.HeadroomPercent = u, pl.target, headroom
	}
	return ScoreForUtilization(float64(pl.target), u), false
}

// UpstreamCPU is upstream TargetLoadPacking's reading of an upstream document's CPU: the last
// CPU metric, in list order, whose operator is AVG or Latest (so an upstream watcher's document
// scores as upstream scores it). Berth's typed form names the window average, which is what
// this reading gives for the lists Berth's watcher serves (Latest, AVG, STD).
func UpstreamCPU(ms []watcher.Metric) (percent float64, ok bool) {
	for _, m := range ms {
		if m.Type != watcher.CPU || (m.Operator != watcher.Average && m.Operator != watcher.Latest) {
			continue
		}
		if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
			continue // ignored, as every reader of the list ignores it
		}
		percent, ok = m.Value, true
	}
	return percent, ok
}

// PredictedUtilization is 100·(measured% · C / 100 + added) / C, in percent; 0 when the
// capacity is unknown (upstream's choice, so the same configs score the same).
func PredictedUtilization(measuredPercent float64, capacityMilli, addedMilli int64) float64 {
	if capacityMilli <= 0 {
		return 0
	}
	c := float64(capacityMilli)
	return 100 * (measuredPercent*c/100 + float64(addedMilli)) / c
}

// ScoreForUtilization is the piecewise-linear TargetLoadPacking curve, unrounded: rising
// from T at 0 % to 100 at the target T, then T·(100−U)/(100−T) down to 0 at 100 %, 0 beyond.
func ScoreForUtilization(target, u float64) float64 {
	switch {
	case u <= target:
		return (100-target)*u/target + target
	case u <= 100:
		return target * (100 - u) / (100 - target)
	default:
		return 0
	}
}

// ScoreExtensions implements fwk.ScorePlugin: NormalizeScore breaks ties at the top.
func (pl *TargetLoadPacking) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore leaves every score as it is but where several nodes share the highest: then
// the one whose unrounded score is highest keeps it and the others lose one point. Why: one
// score point is 1.5 points of utilisation at the default target, so the empty nodes of a
// cluster tie, and the framework picks among tied nodes at random — a workload's small
// replicas that no used node takes then open one empty node each instead of filling one
// (the placement bench's growth shape: 11 replicas of 24m on 11 empty nodes in one second).
// Packing wants the fullest of them; past the target, the least full; the unrounded score says
// both. Scores already in [0, 100] stay in it; nodes whose unrounded scores are equal (those
// that scored neutral) stay tied.
func (pl *TargetLoadPacking) NormalizeScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	top, tied := int64(-1), 0
	for _, s := range scores {
		switch {
		case s.Score > top:
			top, tied = s.Score, 1
		case s.Score == top:
			tied++
		}
	}
	if tied < 2 || top <= 0 || pl.nodes == nil {
		return nil
	}
	podMilli := pl.predictedFromState(state, pod)
	exact := make(map[int]float64, tied)
	best := math.Inf(-1)
	for i := range scores {
		if scores[i].Score != top {
			continue
		}
		ni, err := pl.nodes.Get(scores[i].Name)
		if err != nil || ni == nil || ni.Node() == nil {
			return nil // the snapshot lost it: leave the tie to the framework
		}
		exact[i], _ = pl.exactScore(pl.engine.PreparedState(state, ni.Node()), ni.Node(), podMilli, nil)
		best = max(best, exact[i])
	}
	for i, e := range exact {
		if e < best {
			scores[i].Score--
		}
	}
	return nil
}

// SignerName keys TargetLoadPacking's part of a pod's batching signature.
const SignerName = "berth.dev/" + Name + ".PredictedMilliCPU()"

// SignPod implements fwk.SignPlugin. A node's score depends on the node's load (the same for
// every pod) and on the pod only through its predicted CPU, so pods predicting the same CPU
// may share a cycle's ranking. Reusing it is sound because Reserve changes only the chosen
// node, which the framework re-scores before handing out the next hint; a load snapshot that
// refreshes in between is at most the framework's batch age (500 ms) older than the cycle.
func (pl *TargetLoadPacking) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: SignerName, Value: pl.podMilliCPU(pod)}}, nil
}

// String helps logs and test failures.
func (pl *TargetLoadPacking) String() string {
	return fmt.Sprintf("%s{target=%d%%, multiplier=%g, defaultCPU=%dm}", Name, pl.target, pl.multiplier, pl.defaultCPU)
}
