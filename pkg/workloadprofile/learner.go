package workloadprofile

import (
	"math"
	"sort"
	"time"
)

// Sample is one measured pod's average use over the load watcher's window, in absolute units
// (a workload's pods run on nodes of different sizes, so percentages of a node would not
// compare).
type Sample struct {
	MilliCPU    float64
	MemoryBytes float64
}

// Profile is what a workload's measured pods say a new one will use.
type Profile struct {
	Key Key `json:"key"`
	// MilliCPU and MemoryBytes are the Percentile of the siblings' averages.
	MilliCPU    float64 `json:"milliCPU"`
	MemoryBytes float64 `json:"memoryBytes"`
	// MeanMilliCPU is the siblings' mean CPU: what a group of new replicas centres on (a node
	// counts its unmeasured replicas together around it, see loadaware's pool).
	MeanMilliCPU float64 `json:"meanMilliCPU"`
	// SpreadCPU and SpreadMemory are the siblings' coefficients of variation (std / mean).
	SpreadCPU    float64 `json:"spreadCPU"`
	SpreadMemory float64 `json:"spreadMemory"`
	// Samples is the number of measured pods behind it.
	Samples int `json:"samples"`
	// Updated is when its newest sample was taken (its age is now − Updated).
	Updated time.Time `json:"updated"`
	// Ramp is the median time the siblings seen starting took from binding to come within
	// 10 % of the use they have now; 0 when none was seen starting (a restarted scheduler
	// learns running pods, whose start it did not see).
	Ramp time.Duration `json:"ramp,omitempty"`
	// Usable says the profile may stand for a new pod; when not, Reason says why (too few
	// siblings, pods not alike) and the caller keeps its spec rule.
	Usable bool   `json:"usable"`
	Reason string `json:"reason,omitempty"`
	// EstimateMilliCPU and EstimateMemoryBytes are what a new pod counts at: the percentile
	// plus Margin × spread of it.
	EstimateMilliCPU    int64 `json:"estimateMilliCPU"`
	EstimateMemoryBytes int64 `json:"estimateMemoryBytes"`
}

// Reasons a profile is not usable.
const (
	ReasonTooFew   = "too few measured siblings"
	ReasonUnlike   = "siblings not alike"
	ReasonNoSample = "no measured sibling"
)

type podSample struct {
	uid string
	s   Sample
	at  time.Time
	// bound is when the pod was bound; reached is when its CPU sample last rose to within 10 %
	// of any later one (so reached − bound is how long it took to get to its use), and
	// reachedCPU that sample; seenStarting says its first sample came within
	// StartedWithin of binding, so its ramp is known.
	bound, reached time.Time
	reachedCPU     float64
	seenStarting   bool
}

// StartedWithin is how soon after binding a pod's first sample must come for its ramp to
// count: a pod first measured later was already running when the learner started.
const StartedWithin = 3 * time.Minute

func (p podSample) podUID() string        { return p.uid }
func (p podSample) measuredAt() time.Time { return p.at }

// update is the pod's sample after a new one; a rise of more than 10 % over the sample it was
// thought to have reached its use at means it was still ramping up.
func (p podSample) update(s Sample, at time.Time) podSample {
	p.s, p.at = s, at
	if s.MilliCPU > p.reachedCPU/0.9 {
		p.reached, p.reachedCPU = at, s.MilliCPU
	}
	return p
}

// Learner keeps the latest sample of each measured pod per workload, within Args' bounds
// (MaxSamples pods per workload, MaxWorkloads workloads). It is not safe for concurrent use:
// one goroutine (the engine's refresh loop) feeds it and publishes what Profiles returns.
type Learner struct {
	args      Args
	workloads *bounded[Key, podSample]
}

// NewLearner builds an empty learner; args must be valid.
func NewLearner(args Args) *Learner {
	return &Learner{args: args, workloads: newBounded[Key, podSample](args.MaxWorkloads, args.MaxSamples)}
}

// Observe records pod uid of workload k, bound at bound, using s as measured at time at. A pod measured again
// replaces its sample: every pod counts once, at its latest average. When the workload holds
// MaxSamples pods, the least recently measured one goes; when MaxWorkloads are held, the least
// recently measured workload goes.
func (l *Learner) Observe(k Key, uid string, s Sample, at, bound time.Time) {
	if !validSample(s) {
		return // never learned: a garbage number must not stand for a new pod
	}
	l.workloads.put(k, uid, func(old *podSample) podSample {
		if old != nil {
			return old.update(s, at)
		}
		return podSample{uid: uid, s: s, at: at, bound: bound, reached: at, reachedCPU: s.MilliCPU,
			seenStarting: !bound.IsZero() && at.Sub(bound) <= StartedWithin}
	})
}

func validSample(s Sample) bool {
	ok := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0 }
	return ok(s.MilliCPU) && ok(s.MemoryBytes)
}

// Len is the number of workloads and of samples held (tests, metrics).
func (l *Learner) Len() (workloads, samples int) {
	return l.workloads.size()
}

// Profiles drops samples older than MaxAge at now and returns every workload's profile, usable
// or not (the record says why not). Called once per watcher document, outside any scheduling
// cycle; the result is the caller's to publish and is never changed afterwards.
func (l *Learner) Profiles(now time.Time) map[Key]Profile {
	out := make(map[Key]Profile, len(l.workloads.groups))
	l.workloads.sweep(now, l.args.MaxAge, func(k Key, pods []podSample) { out[k] = l.profile(k, pods) })
	return out
}

func (l *Learner) profile(k Key, pods []podSample) Profile {
	cpu := make([]float64, len(pods))
	mem := make([]float64, len(pods))
	var ramps []float64
	p := Profile{Key: k, Samples: len(pods)}
	for i, s := range pods {
		cpu[i], mem[i] = s.s.MilliCPU, s.s.MemoryBytes
		if s.at.After(p.Updated) {
			p.Updated = s.at
		}
		if s.seenStarting {
			ramps = append(ramps, float64(s.reached.Sub(s.bound)))
		}
	}
	if len(ramps) > 0 {
		p.Ramp = time.Duration(percentile(ramps, 50))
	}
	p.MeanMilliCPU, _ = meanSD(cpu)
	p.MilliCPU, p.SpreadCPU = percentile(cpu, l.args.Percentile), spread(cpu)
	p.MemoryBytes, p.SpreadMemory = percentile(mem, l.args.Percentile), spread(mem)
	p.EstimateMilliCPU = int64(math.Ceil(p.MilliCPU * (1 + l.args.Margin*p.SpreadCPU)))
	p.EstimateMemoryBytes = int64(math.Ceil(p.MemoryBytes * (1 + l.args.Margin*p.SpreadMemory)))
	switch {
	case p.Samples < l.args.MinSiblings:
		p.Reason = ReasonTooFew
	case p.SpreadCPU > l.args.MaxSpread || p.SpreadMemory > l.args.MaxSpread:
		p.Reason = ReasonUnlike
	default:
		p.Usable = true
	}
	return p
}

// percentile is the nearest-rank q-th percentile of vs (sorted in place).
func percentile(vs []float64, q float64) float64 {
	sort.Float64s(vs)
	rank := int(math.Ceil(q / 100 * float64(len(vs))))
	return vs[min(max(rank, 1), len(vs))-1]
}

// spread is the coefficient of variation (population standard deviation / mean); 0 for an
// all-zero set, whose pods are alike.
func spread(vs []float64) float64 {
	mean, sd := meanSD(vs)
	if mean <= 0 {
		return 0
	}
	return sd / mean
}

// meanSD is the mean and population standard deviation of vs (not empty).
func meanSD(vs []float64) (mean, sd float64) {
	for _, v := range vs {
		mean += v
	}
	mean /= float64(len(vs))
	var sq float64
	for _, v := range vs {
		sq += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sq / float64(len(vs)))
}
