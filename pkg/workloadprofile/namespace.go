package workloadprofile

import (
	"math"
	"time"

	configv1 "github.com/berth-sched/berth/api/config/v1"
)

// Ratio is what a namespace's measured pods say about how much of its CPU request a pod of
// that namespace uses: the estimate for its pods that no workload profile covers (bare pods,
// replicas of a workload not learned yet). Per namespace, never across: a tenant's pods can
// only move the estimates of its own pods.
type Ratio struct {
	Namespace string `json:"namespace"`
	// Mean and SD are the mean and population standard deviation of the measured pods' CPU
	// use ÷ CPU request.
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	// Samples is the number of measured pods behind it.
	Samples int `json:"samples"`
	// Updated is when its newest sample was taken.
	Updated time.Time `json:"updated"`
	// Usable says Samples reached NamespaceMinPods.
	Usable bool `json:"usable"`
}

// Estimate is what a pod of the namespace requesting requestMilli counts at alone (mean +
// margin × SD of the ratio, times the request, rounded up), and the mean and standard
// deviation that a node's unmeasured pods add up by (see the load-aware tracker).
func (r Ratio) Estimate(requestMilli int64, margin float64) (est int64, mean, sd float64) {
	req := float64(requestMilli)
	mean, sd = r.Mean*req, r.SD*req
	return int64(math.Ceil(mean + margin*sd)), mean, sd
}

// NamespaceMaxSamples bounds the measured pods a namespace keeps (least recently measured out
// first): enough for a mean and a deviation, whatever the namespace's size.
const NamespaceMaxSamples = configv1.ProfileNamespaceMaxSamples

type ratioSample struct {
	uid   string
	ratio float64
	at    time.Time
}

func (s ratioSample) podUID() string        { return s.uid }
func (s ratioSample) measuredAt() time.Time { return s.at }

// NamespaceLearner keeps the latest use-to-request ratio of each measured pod per namespace,
// at most NamespaceMaxSamples pods per namespace and MaxWorkloads namespaces (least recently
// measured out first in both). Not safe for concurrent use, like Learner.
type NamespaceLearner struct {
	args Args
	byNS *bounded[string, ratioSample]
}

// NewNamespaceLearner builds an empty learner; args must be valid.
func NewNamespaceLearner(args Args) *NamespaceLearner {
	return &NamespaceLearner{args: args, byNS: newBounded[string, ratioSample](args.MaxWorkloads, NamespaceMaxSamples)}
}

// Observe records pod uid of namespace ns using ratio × its CPU request, measured at at. A
// ratio that is not a finite number ≥ 0 is never learned.
func (l *NamespaceLearner) Observe(ns, uid string, ratio float64, at time.Time) {
	if math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio < 0 {
		return
	}
	l.byNS.put(ns, uid, func(*ratioSample) ratioSample { return ratioSample{uid: uid, ratio: ratio, at: at} })
}

// Len is the number of namespaces and of samples held (tests).
func (l *NamespaceLearner) Len() (namespaces, samples int) {
	return l.byNS.size()
}

// Ratios drops samples older than MaxAge at now and returns every namespace's ratio, usable
// or not. Called once per watcher document, outside any scheduling cycle.
func (l *NamespaceLearner) Ratios(now time.Time) map[string]Ratio {
	out := make(map[string]Ratio, len(l.byNS.groups))
	l.byNS.sweep(now, l.args.MaxAge, func(ns string, pods []ratioSample) {
		r := Ratio{Namespace: ns, Samples: len(pods)}
		ratios := make([]float64, len(pods))
		for i, s := range pods {
			ratios[i] = s.ratio
			if s.at.After(r.Updated) {
				r.Updated = s.at
			}
		}
		r.Mean, r.SD = meanSD(ratios)
		r.Usable = l.args.NamespaceMinPods > 0 && r.Samples >= l.args.NamespaceMinPods
		out[ns] = r
	})
	return out
}
