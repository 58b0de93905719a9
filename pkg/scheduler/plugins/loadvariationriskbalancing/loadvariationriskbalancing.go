// Package loadvariationriskbalancing implements the LoadVariationRiskBalancing score plugin:
// it balances the risk (mean plus a margin of the standard deviation of real utilisation)
// across nodes, per CPU and memory, and ranks a node by its riskiest resource.
package loadvariationriskbalancing

import (
	"context"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
)

// Name is the plugin name, the same as upstream so existing configurations keep working.
const Name = "LoadVariationRiskBalancing"

const mebibyte = 1 << 20

// LoadVariationRiskBalancing scores nodes by 100·(1 − max over resources of risk).
type LoadVariationRiskBalancing struct {
	args        *LoadVariationRiskBalancingArgs
	margin      float64
	sensitivity float64
	engine      *loadaware.Engine
	// Hooks are PreFilter, Filter, Reserve and Unreserve: the engine's, as in every
	// load-aware plugin.
	loadaware.Hooks
}

var (
	_ fwk.ScorePlugin     = &LoadVariationRiskBalancing{}
	_ fwk.PreScorePlugin  = &LoadVariationRiskBalancing{}
	_ fwk.FilterPlugin    = &LoadVariationRiskBalancing{}
	_ fwk.PreFilterPlugin = &LoadVariationRiskBalancing{}
	_ fwk.ReservePlugin   = &LoadVariationRiskBalancing{}
	// why: without SignPlugin the framework turns opportunistic batching off for the whole
	// profile (see TargetLoadPacking).
	_ fwk.SignPlugin = &LoadVariationRiskBalancing{}
)

// New is the scheduler framework factory; the refresh loop stops when ctx ends.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return NewWithOptions(ctx, obj, h, loadaware.Options{})
}

// NewWithOptions is New with test seams.
func NewWithOptions(ctx context.Context, obj runtime.Object, h fwk.Handle, opts loadaware.Options) (*LoadVariationRiskBalancing, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	pl := &LoadVariationRiskBalancing{args: args}
	pl.margin, pl.sensitivity = varianceKnobs(args)
	pl.engine, err = loadaware.NewEngine(ctx, Name, args.LoadAwareArgs, h, estimate, opts)
	if err != nil {
		return nil, err
	}
	pl.Hooks = loadaware.HooksFor(pl.engine)
	return pl, nil
}

// Name implements fwk.Plugin.
func (pl *LoadVariationRiskBalancing) Name() string { return Name }

// Engine exposes the snapshot and tracker (tests, debugging).
func (pl *LoadVariationRiskBalancing) Engine() *loadaware.Engine { return pl.engine }

// estimate is the pod's effective request (max of the init-container peak and the steady
// state, plus overhead), the load the plugin adds for the incoming pod as well.
func estimate(pod *v1.Pod) loadaware.Estimate {
	r := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return loadaware.Estimate{MilliCPU: r.Cpu().MilliValue(), MemoryBytes: r.Memory().Value()}
}

// ResourceStats are one resource's numbers in one unit (millicores, or MiB).
type ResourceStats struct {
	Capacity, Req, UsedAvg, UsedStdev float64
}

// MuSigma returns the predicted utilisation μ = (used + request)/capacity and the relative
// deviation σ = stdev/capacity, both clamped to [0, 1]; (0, 0) without capacity.
func (s ResourceStats) MuSigma() (mu, sigma float64) {
	if s.Capacity <= 0 {
		return 0, 0
	}
	return clamp01((s.UsedAvg + s.Req) / s.Capacity), clamp01(s.UsedStdev / s.Capacity)
}

func clamp01(x float64) float64 { return math.Max(0, math.Min(1, x)) }

// ComputeScore is one resource's score, unrounded: 100·(1 − (μ + margin·σ^(1/sensitivity))/2)
// with inputs clamped as upstream does (a negative sensitivity skips the root, a
// negative margin drops the deviation).
func ComputeScore(margin, sensitivity float64, s ResourceStats) float64 {
	if s.Capacity <= 0 {
		return 0
	}
	s.Req = math.Max(s.Req, 0)
	s.UsedAvg = math.Max(0, math.Min(s.Capacity, s.UsedAvg))
	s.UsedStdev = math.Max(0, math.Min(s.Capacity, s.UsedStdev))
	mu, sigma := s.MuSigma()
	if sensitivity >= 0 {
		sigma = math.Pow(sigma, 1/sensitivity)
	}
	sigma = clamp01(margin * sigma)
	return 100 * (1 - (mu+sigma)/2)
}

const stateKey fwk.StateKey = Name + ".podRequests"

// podRequests is the pod's requests, computed once per cycle in PreScore.
type podRequests struct {
	est loadaware.Estimate
}

func (p *podRequests) Clone() fwk.StateData { return p }

// PreScore computes the pod's requests once per cycle: PodRequests allocates, and Score runs
// for every node.
// The cycle's nodes are scored here through the engine's memo (only nodes whose load changed
// are computed), so Score only looks the result up.
func (pl *LoadVariationRiskBalancing) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	r := &podRequests{est: pl.podEstimate(pod)}
	state.Write(stateKey, r)
	pl.engine.PrepareScores(state, nodes, [2]int64{r.est.MilliCPU, r.est.MemoryBytes}, func(st loadaware.NodeState, ni fwk.NodeInfo) int64 {
		return pl.score(st, ni, r.est, nil)
	})
	return nil
}

// SignerName keys LoadVariationRiskBalancing's part of a pod's batching signature.
const SignerName = "berth.dev/" + Name + ".PodRequests()"

// SignPod implements fwk.SignPlugin: a node's score depends on the pod only through its CPU
// and memory requests; the rest is the node's load and what Reserve placed on it (the chosen
// node, which the framework re-scores before reusing a ranking).
func (pl *LoadVariationRiskBalancing) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	e := pl.podEstimate(pod)
	return []fwk.SignFragment{{Key: SignerName, Value: [2]int64{e.MilliCPU, e.MemoryBytes}}}, nil
}

// podEstimate is what the pod counts at: its workload's profile estimate when there is a usable
// one, else its requests.
func (pl *LoadVariationRiskBalancing) podEstimate(pod *v1.Pod) loadaware.Estimate {
	return pl.engine.Estimate(pod, estimate)
}

func (pl *LoadVariationRiskBalancing) requestsFromState(state fwk.CycleState, pod *v1.Pod) loadaware.Estimate {
	if state != nil {
		if d, err := state.Read(stateKey); err == nil {
			if r, ok := d.(*podRequests); ok {
				return r.est
			}
		}
	}
	// PreScore not enabled (score-only configuration): compute here.
	return pl.podEstimate(pod)
}

// Score implements fwk.ScorePlugin. It reads memory only.
func (pl *LoadVariationRiskBalancing) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	if s, ok := pl.engine.PreparedScore(state, nodeInfo); ok {
		return s, nil
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	return pl.score(pl.engine.NodeOf(node), nodeInfo, pl.requestsFromState(state, pod), nil), nil
}

// ExplainScore is what a decision record shows for the node: the same score function over the
// load state the cycle scored the node from, with the terms written out.
func (pl *LoadVariationRiskBalancing) ExplainScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) any {
	node := nodeInfo.Node()
	if node == nil {
		return nil
	}
	var d decisionapi.LoadDetail
	pl.score(pl.engine.PreparedState(state, node), nodeInfo, pl.requestsFromState(state, pod), &d)
	pl.engine.ExplainEstimate(pod, &d)
	return d
}

// score is LoadVariationRiskBalancing's one score path; with d it also writes the terms it used.
func (pl *LoadVariationRiskBalancing) score(st loadaware.NodeState, nodeInfo fwk.NodeInfo, req loadaware.Estimate, d *decisionapi.LoadDetail) int64 {
	if st.Freshness != loadaware.Fresh || (!st.Metrics.CPU.Valid && !st.Metrics.Memory.Valid) {
		if d != nil {
			*d = pl.engine.Detail(st)
			d.Neutral = true
		}
		return pl.engine.NeutralScore()
	}
	score, found := 0.0, false
	// terms are the per-resource inputs for the decision record (cpu is considered first,
	// then memory); filled only when explaining.
	var terms [2]decisionapi.RiskTerms
	considered := 0
	consider := func(rd loadaware.ResourceData, capacity, request float64) {
		considered++
		if !rd.Valid {
			return
		}
		s := ComputeScore(pl.margin, pl.sensitivity, ResourceStats{
			Capacity:  capacity,
			Req:       request,
			UsedAvg:   rd.Avg / 100 * capacity,
			UsedStdev: rd.Std / 100 * capacity,
		})
		if d != nil {
			terms[considered-1] = decisionapi.RiskTerms{Valid: true, AvgPercent: rd.Avg, StdPercent: rd.Std, Allocatable: capacity,
				Request: request, Score: s, Margin: pl.margin, Sensitivity: pl.sensitivity}
		}
		if !found || s < score {
			score, found = s, true
		}
	}
	// Pods placed since the sample are not in its average: add them to this pod's request.
	// The node's allocatable comes from the NodeInfo, where the framework parsed it once per
	// node update (same MilliValue/Value), not from the quantities once per node per cycle.
	alloc := nodeInfo.GetAllocatable()
	consider(st.Metrics.CPU, float64(alloc.GetMilliCPU()),
		float64(req.MilliCPU+st.Unreported.MilliCPU))
	consider(st.Metrics.Memory, float64(alloc.GetMemory())/mebibyte,
		float64(req.MemoryBytes+st.Unreported.MemoryBytes)/mebibyte)
	if d != nil {
		*d = pl.engine.Detail(st)
		d.CPU, d.Memory = terms[0], terms[1]
		// Each term apart: the window average is in CPU/Memory, the placed pods' remaining
		// estimate in Unreported*, the incoming pod here (Request is their sum).
		d.PodMilliCPU, d.PodMemoryBytes = req.MilliCPU, req.MemoryBytes
	}
	return loadaware.RoundScore(score)
}

// ScoreExtensions implements fwk.ScorePlugin: scores are already in [0, 100].
func (pl *LoadVariationRiskBalancing) ScoreExtensions() fwk.ScoreExtensions { return nil }
