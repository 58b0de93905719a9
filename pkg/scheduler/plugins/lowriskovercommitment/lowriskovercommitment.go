// Package lowriskovercommitment implements the LowRiskOverCommitment score plugin: per CPU and
// memory, the risk that the node's pods overrun its allocatable, from their limits (how far
// they exceed allocatable) and from measured load (how likely the load outgrows the requests,
// a Beta distribution fitted to the window's mean and deviation); a node ranks by its riskier
// resource. Upstream Trimaran's third plugin, on Berth's load-aware engine.
package lowriskovercommitment

import (
	"context"
	"math"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
)

// Name is the plugin name, the same as upstream so existing configurations keep working.
const Name = "LowRiskOverCommitment"

// LowRiskOverCommitment scores nodes by 100·(1 − max over cpu and memory of risk).
type LowRiskOverCommitment struct {
	// sqrtWindow is √smoothingWindowSize; weights are riskLimitWeights (cpu, memory).
	sqrtWindow float64
	weights    [2]float64
	engine     *loadaware.Engine
	// Hooks are PreFilter, Filter, Reserve and Unreserve: the engine's, as in every
	// load-aware plugin.
	loadaware.Hooks
	// totals holds each node's pods' requests and limits by node name, computed once per
	// NodeInfo generation (Score runs for every node of every cycle; the pods change less).
	totals sync.Map
}

var (
	_ fwk.ScorePlugin     = &LowRiskOverCommitment{}
	_ fwk.PreScorePlugin  = &LowRiskOverCommitment{}
	_ fwk.FilterPlugin    = &LowRiskOverCommitment{}
	_ fwk.PreFilterPlugin = &LowRiskOverCommitment{}
	_ fwk.ReservePlugin   = &LowRiskOverCommitment{}
	// why: without SignPlugin the framework turns opportunistic batching off for the whole
	// profile (see TargetLoadPacking).
	_ fwk.SignPlugin = &LowRiskOverCommitment{}
)

// New is the scheduler framework factory; the refresh loop stops when ctx ends.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return NewWithOptions(ctx, obj, h, loadaware.Options{})
}

// NewWithOptions is New with test seams.
func NewWithOptions(ctx context.Context, obj runtime.Object, h fwk.Handle, opts loadaware.Options) (*LowRiskOverCommitment, error) {
	args, err := config.Parse(obj, Name, config.ValidateLowRiskOverCommitmentArgs)
	if err != nil {
		return nil, err
	}
	pl := &LowRiskOverCommitment{sqrtWindow: math.Sqrt(float64(*args.SmoothingWindowSize))}
	pl.weights[0], _ = config.RiskLimitWeight(*args.RiskLimitWeights.CPU) // validated by Parse
	pl.weights[1], _ = config.RiskLimitWeight(*args.RiskLimitWeights.Memory)
	pl.engine, err = loadaware.NewEngine(ctx, Name, args.LoadAwareArgs, h, requests, opts)
	if err != nil {
		return nil, err
	}
	pl.Hooks = loadaware.HooksFor(pl.engine)
	return pl, nil
}

// Args are the plugin's arguments (api/config/v1).
type Args = configv1.LowRiskOverCommitmentArgs

// Name implements fwk.Plugin.
func (pl *LowRiskOverCommitment) Name() string { return Name }

// Engine exposes the snapshot and tracker (tests, debugging).
func (pl *LowRiskOverCommitment) Engine() *loadaware.Engine { return pl.engine }

// requests is the pod's effective request (the init-container peak or the steady state, plus
// overhead): what the engine adds to a node's load for a pod placed there until reported.
func requests(pod *v1.Pod) loadaware.Estimate {
	r := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return loadaware.Estimate{MilliCPU: r.Cpu().MilliValue(), MemoryBytes: r.Memory().Value()}
}

// podResources are a pod's requests and limits, limits raised to requests per resource (a
// container without a limit may use up to its request at least): [cpu m, memory B].
type podResources struct {
	req, lim [2]int64
}

func (p *podResources) Clone() fwk.StateData { return p }

func resourcesOf(pod *v1.Pod) podResources {
	r := requests(pod)
	l := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	p := podResources{req: [2]int64{r.MilliCPU, r.MemoryBytes}, lim: [2]int64{l.Cpu().MilliValue(), l.Memory().Value()}}
	for i := range p.lim {
		p.lim[i] = max(p.lim[i], p.req[i])
	}
	return p
}

// nodeTotals are the sums of podResources over a node's pods at one NodeInfo generation.
type nodeTotals struct {
	generation int64
	podResources
}

// totalsOf returns the node's pods' requests and limits, summed again only when the
// framework's NodeInfo generation moved (a pod added, removed or updated).
func (pl *LowRiskOverCommitment) totalsOf(ni fwk.NodeInfo) podResources {
	name, gen := ni.Node().Name, ni.GetGeneration()
	if v, ok := pl.totals.Load(name); ok && v.(*nodeTotals).generation == gen {
		return v.(*nodeTotals).podResources
	}
	t := &nodeTotals{generation: gen}
	for _, p := range ni.GetPods() {
		r := resourcesOf(p.GetPod())
		for i := range t.req {
			t.req[i] += r.req[i]
			t.lim[i] += r.lim[i]
		}
	}
	pl.totals.Store(name, t)
	return t.podResources
}

const stateKey fwk.StateKey = Name + ".podResources"

// PreScore computes the pod's requests and limits once per cycle.
func (pl *LowRiskOverCommitment) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	r := resourcesOf(pod)
	state.Write(stateKey, &r)
	return nil
}

func resourcesFromState(state fwk.CycleState, pod *v1.Pod) podResources {
	if state != nil {
		if d, err := state.Read(stateKey); err == nil {
			if r, ok := d.(*podResources); ok {
				return *r
			}
		}
	}
	// PreScore not enabled (score-only configuration): compute here.
	return resourcesOf(pod)
}

// SignerName keys LowRiskOverCommitment's part of a pod's batching signature.
const SignerName = "berth.dev/" + Name + ".PodRequestsAndLimits()"

// SignPod implements fwk.SignPlugin: a node's score depends on the pod only through its
// requests and limits.
func (pl *LowRiskOverCommitment) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	r := resourcesOf(pod)
	return []fwk.SignFragment{{Key: SignerName, Value: [4]int64{r.req[0], r.req[1], r.lim[0], r.lim[1]}}}, nil
}

// Score implements fwk.ScorePlugin. It reads memory only.
func (pl *LowRiskOverCommitment) Score(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	return pl.score(pl.engine.NodeOf(node), nodeInfo, resourcesFromState(state, pod), nil), nil
}

// ExplainScore is what a decision record shows for the node: the same score function, with
// its terms written out.
func (pl *LowRiskOverCommitment) ExplainScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) any {
	node := nodeInfo.Node()
	if node == nil {
		return nil
	}
	var d decisionapi.LoadDetail
	pl.score(pl.engine.NodeOf(node), nodeInfo, resourcesFromState(state, pod), &d)
	return d
}

// formula is how the decision record's terms make the score.
const formula = "risk = clamp(w·limitRisk + (1−w)·loadRisk); score 100·(1 − max risk)"

// score is the plugin's one score path; with d it also writes the terms it used.
func (pl *LowRiskOverCommitment) score(st loadaware.NodeState, ni fwk.NodeInfo, pod podResources, d *decisionapi.LoadDetail) int64 {
	if d != nil {
		*d = pl.engine.Detail(st)
		d.PodMilliCPU, d.PodMemoryBytes = pod.req[0], pod.req[1]
	}
	if pod.req == [2]int64{} && pod.lim == [2]int64{} {
		// A BestEffort pod risks nothing it asked for (upstream scores it 0 everywhere).
		if d != nil {
			d.Formula = "BestEffort pod: 0 on every node"
		}
		return 0
	}
	if st.Freshness != loadaware.Fresh || (!st.Metrics.CPU.Valid && !st.Metrics.Memory.Valid) {
		if d != nil {
			d.Neutral = true
		}
		return pl.engine.NeutralScore()
	}
	others := pl.totalsOf(ni)
	alloc := ni.GetAllocatable()
	capacity := [2]int64{alloc.GetMilliCPU(), alloc.GetMemory()}
	// Pods placed since the sample are not in its mean yet: they count as measured load.
	unreported := [2]int64{st.Unreported.MilliCPU, st.Unreported.MemoryBytes}
	metrics := [2]loadaware.ResourceData{st.Metrics.CPU, st.Metrics.Memory}
	worst := 0.0
	for i, res := range [2]string{"cpu", "memory"} {
		in := Inputs{
			Capacity: float64(capacity[i]), Weight: pl.weights[i], SqrtWindow: pl.sqrtWindow,
			Request: float64(min(others.req[i]+pod.req[i], capacity[i])), Limit: float64(others.lim[i] + pod.lim[i]),
			RequestOthers: float64(min(others.req[i], capacity[i])), LimitOthers: float64(others.lim[i]),
			Measured: metrics[i].Valid, Mean: metrics[i].Avg/100 + float64(unreported[i])/math.Max(float64(capacity[i]), 1), Std: metrics[i].Std / 100,
		}
		r := in.Risk()
		worst = math.Max(worst, r.Risk)
		if d != nil {
			d.Terms = append(d.Terms, decisionapi.Term{Resource: res, Name: "limitRisk", Value: r.LimitRisk},
				decisionapi.Term{Resource: res, Name: "loadRisk", Value: r.LoadRisk}, decisionapi.Term{Resource: res, Name: "w", Value: in.Weight},
				decisionapi.Term{Resource: res, Name: "risk", Value: r.Risk, Key: true})
		}
	}
	if d != nil {
		d.Formula = formula
	}
	return loadaware.RoundScore(100 * (1 - worst))
}

// Inputs are one resource's numbers on one node: requests and limits with the incoming pod
// (Request capped at Capacity) and without it (…Others), the measured mean and deviation as
// fractions of capacity, the weight of the limit risk and √smoothingWindowSize.
type Inputs struct {
	Request, Limit, RequestOthers, LimitOthers, Capacity float64
	Measured                                             bool
	Mean, Std                                            float64
	Weight, SqrtWindow                                   float64
}

// Risks are one resource's risks, each in [0, 1].
type Risks struct{ LimitRisk, LoadRisk, Risk float64 }

// Risk is upstream's risk of one resource: the limit risk (how far limits pass allocatable,
// of the room limits leave over requests) weighed against the load risk (1 − the probability
// that the load stays within the other pods' requests), clamped to [0, 1].
func (in Inputs) Risk() Risks {
	var r Risks
	if in.Limit > in.Capacity {
		r.LimitRisk = (in.Limit - in.Capacity) / (in.Limit - in.Request)
	}
	if in.Measured {
		r.LoadRisk = 1 - in.loadProbability()
	}
	r.Risk = clamp01(in.Weight*r.LimitRisk + (1-in.Weight)*r.LoadRisk)
	return r
}

// loadProbability is P(load ≤ other pods' requests), the load a Beta distribution of the
// window's mean and smoothed deviation, conditioned on the load staying within their limits
// when those are under allocatable.
func (in Inputs) loadProbability() float64 {
	if in.Capacity <= 0 {
		return 0
	}
	mu, sigma := clamp01(in.Mean), clamp01(in.Std)*in.SqrtWindow
	sigma = math.Min(sigma, maxDeviation(mu))
	theta := clamp01(in.RequestOthers / in.Capacity)
	p, beta := probability(mu, sigma, theta)
	if in.LimitOthers < in.Capacity && in.RequestOthers <= in.LimitOthers {
		thetaL := in.LimitOthers / in.Capacity
		switch {
		case thetaL == 0:
			p = 1
		case beta != nil:
			if f := beta.cdf(thetaL); f > 0 {
				p = clamp01(p / f)
			}
		}
	}
	return p
}

// maxDeviation keeps a Beta distribution fittable: its variance stays under μ(1−μ).
func maxDeviation(mu float64) float64 {
	if mu <= 0 || mu >= 1 {
		return 0
	}
	return math.Sqrt(0.99 * mu * (1 - mu))
}

// probability is P(X ≤ θ) for X of mean μ and deviation σ on [0, 1]: a point mass without
// deviation, else the Beta distribution with those moments (nil when none fits: P 0).
func probability(mu, sigma, theta float64) (float64, *betaDist) {
	switch {
	case mu == 0 || (sigma == 0 && mu <= theta):
		return 1, nil
	case sigma == 0:
		return 0, nil
	}
	b := fitBeta(mu, sigma*sigma)
	if b == nil {
		return 0, nil
	}
	return b.cdf(theta), b
}

// betaDist is a Beta(α, β) distribution.
type betaDist struct{ alpha, beta float64 }

// fitBeta matches a Beta distribution's mean and variance (the method of moments); nil when
// the variance is too large for any (≥ μ(1−μ)).
func fitBeta(mu, variance float64) *betaDist {
	if mu <= 0 || mu >= 1 || variance <= 0 || variance >= mu*(1-mu) {
		return nil
	}
	t := math.Max(mu*(1-mu)/variance-1, math.SmallestNonzeroFloat64)
	return &betaDist{alpha: mu * t, beta: (1 - mu) * t}
}

// cdf is the regularised incomplete beta function I_x(α, β); 0 where it does not compute.
func (b *betaDist) cdf(x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	v := regIncBeta(b.alpha, b.beta, x)
	if math.IsNaN(v) || v < 0 || v > 1 {
		return 0
	}
	return v
}

// regIncBeta evaluates I_x(a, b) by its continued fraction (modified Lentz), on the side of
// x where the fraction converges fast, using I_x(a, b) = 1 − I_{1−x}(b, a) on the other.
func regIncBeta(a, b, x float64) float64 {
	if x > (a+1)/(a+b+2) {
		return 1 - regIncBeta(b, a, 1-x)
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab-la-lb+a*math.Log(x)+b*math.Log1p(-x)) / a
	return front * betaFraction(a, b, x)
}

// betaFraction is the continued fraction of the incomplete beta function at x.
func betaFraction(a, b, x float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	f := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		for _, num := range [2]float64{
			fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm)),
			-(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1)),
		} {
			d = 1 + num*d
			if math.Abs(d) < tiny {
				d = tiny
			}
			c = 1 + num/c
			if math.Abs(c) < tiny {
				c = tiny
			}
			d = 1 / d
			f *= c * d
		}
		if math.Abs(c*d-1) < eps {
			break
		}
	}
	return f
}

func clamp01(x float64) float64 { return math.Max(0, math.Min(1, x)) }

// ScoreExtensions implements fwk.ScorePlugin: scores are already in [0, 100].
func (pl *LowRiskOverCommitment) ScoreExtensions() fwk.ScoreExtensions { return nil }
