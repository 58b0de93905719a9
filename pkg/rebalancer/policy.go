package rebalancer

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// Resource is a resource the thresholds may name.
type Resource string

// Resources the rebalancer reads.
const (
	CPU    Resource = "cpu"
	Memory Resource = "memory"
)

// Thresholds are per-resource percentages; a resource not named is not considered.
type Thresholds struct {
	CPU, Memory       float64
	HasCPU, HasMemory bool
}

func (t Thresholds) named() []Resource {
	var r []Resource
	if t.HasCPU {
		r = append(r, CPU)
	}
	if t.HasMemory {
		r = append(r, Memory)
	}
	return r
}

func (t Thresholds) of(r Resource) float64 {
	if r == CPU {
		return t.CPU
	}
	return t.Memory
}

func (u Usage) of(r Resource) float64 {
	if r == CPU {
		return u.CPU
	}
	return u.Memory
}

func (u *Usage) add(o Usage, sign float64) {
	u.CPU += sign * o.CPU
	u.Memory += sign * o.Memory
}

// Limits bound evictions.
type Limits struct {
	PerNode, PerNamespace, PerOwner, PerRound int
	EvictionsPerSecond                        float64
	OwnerCooldown                             time.Duration
}

// Policy is a validated, defaulted Rebalancer spec.
type Policy struct {
	Low, High         Thresholds
	AnomalyRounds     int
	MinColdNodes      int
	Expiry            time.Duration
	Interval          time.Duration
	SchedulerNames    sets.Set[string]
	ProtectedNS       sets.Set[string]
	MaxPriority       int32
	AllowLocalStorage bool
	AllowPVC          bool
	DryRun            bool
	Limits            Limits
}

func thresholds(t berthv1alpha1.ResourceThresholds) Thresholds {
	var out Thresholds
	if t.CPU != nil {
		out.CPU, out.HasCPU = float64(*t.CPU), true
	}
	if t.Memory != nil {
		out.Memory, out.HasMemory = float64(*t.Memory), true
	}
	return out
}

func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

// NewPolicy defaults and validates a spec again where it is used (the CRD's schema and CEL
// rules refuse the same input at the API; an object written before them, or by a client that
// skipped validation, must not reach the planner). protected are namespaces never touched
// besides the spec's (kube-system and the operator's own).
func NewPolicy(spec *berthv1alpha1.RebalancerSpec, protected ...string) (*Policy, error) {
	var errs field.ErrorList
	p := field.NewPath("spec")
	checkRange := func(path *field.Path, v *int32) {
		if v != nil && (*v < 0 || *v > 100) {
			errs = append(errs, field.Invalid(path, *v, "must be between 0 and 100"))
		}
	}
	checkRange(p.Child("lowThresholds", "cpu"), spec.LowThresholds.CPU)
	checkRange(p.Child("lowThresholds", "memory"), spec.LowThresholds.Memory)
	checkRange(p.Child("highThresholds", "cpu"), spec.HighThresholds.CPU)
	checkRange(p.Child("highThresholds", "memory"), spec.HighThresholds.Memory)
	low, high := thresholds(spec.LowThresholds), thresholds(spec.HighThresholds)
	if len(high.named()) == 0 {
		errs = append(errs, field.Required(p.Child("highThresholds"), "name cpu, memory or both"))
	}
	if low.HasCPU != high.HasCPU || low.HasMemory != high.HasMemory {
		errs = append(errs, field.Invalid(p.Child("lowThresholds"), spec.LowThresholds, "must name the same resources as highThresholds"))
	}
	if low.HasCPU && high.HasCPU && low.CPU >= high.CPU {
		errs = append(errs, field.Invalid(p.Child("lowThresholds", "cpu"), low.CPU, "must be below highThresholds.cpu"))
	}
	if low.HasMemory && high.HasMemory && low.Memory >= high.Memory {
		errs = append(errs, field.Invalid(p.Child("lowThresholds", "memory"), low.Memory, "must be below highThresholds.memory"))
	}
	pol := &Policy{
		Low: low, High: high,
		AnomalyRounds:     int(orDefault(spec.AnomalyRounds, 3)),
		MinColdNodes:      int(spec.MinColdNodes),
		Expiry:            time.Duration(orDefault(spec.MetricsExpirySeconds, 180)) * time.Second,
		Interval:          time.Duration(orDefault(spec.IntervalSeconds, 60)) * time.Second,
		SchedulerNames:    sets.New(spec.SchedulerNames...),
		ProtectedNS:       sets.New(append([]string{"kube-system"}, protected...)...).Insert(spec.Victims.ExcludedNamespaces...),
		MaxPriority:       999999999,
		AllowLocalStorage: spec.Victims.AllowLocalStorage,
		AllowPVC:          spec.Victims.AllowPVC,
		DryRun:            spec.DryRun,
		Limits: Limits{
			PerNode:            int(orDefault(spec.Limits.PerNode, 2)),
			PerNamespace:       int(orDefault(spec.Limits.PerNamespace, 5)),
			PerOwner:           int(orDefault(spec.Limits.PerOwner, 1)),
			PerRound:           int(orDefault(spec.Limits.PerRound, 10)),
			EvictionsPerSecond: float64(orDefault(spec.Limits.EvictionsPerSecond, 5)),
			OwnerCooldown:      time.Duration(spec.Limits.OwnerCooldownSeconds) * time.Second,
		},
	}
	pol.ProtectedNS.Delete("")
	if spec.Victims.MaxPriority != nil {
		pol.MaxPriority = *spec.Victims.MaxPriority
	}
	if len(pol.SchedulerNames) == 0 {
		pol.SchedulerNames.Insert("berth-scheduler")
	}
	if pol.SchedulerNames.Has("default-scheduler") {
		errs = append(errs, field.Invalid(p.Child("schedulerNames"), spec.SchedulerNames, "default-scheduler does not place pods on measured load"))
	}
	if spec.AnomalyRounds < 0 {
		errs = append(errs, field.Invalid(p.Child("anomalyRounds"), spec.AnomalyRounds, "must be at least 1"))
	}
	if spec.MinColdNodes < 0 {
		errs = append(errs, field.Invalid(p.Child("minColdNodes"), spec.MinColdNodes, "must not be negative"))
	}
	if spec.IntervalSeconds < 0 || spec.MetricsExpirySeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("intervalSeconds"), spec.IntervalSeconds, "durations must not be negative"))
	}
	for name, v := range map[string]int32{"perNode": spec.Limits.PerNode, "perNamespace": spec.Limits.PerNamespace, "perOwner": spec.Limits.PerOwner,
		"perRound": spec.Limits.PerRound, "evictionsPerSecond": spec.Limits.EvictionsPerSecond, "ownerCooldownSeconds": spec.Limits.OwnerCooldownSeconds} {
		if v < 0 {
			errs = append(errs, field.Invalid(p.Child("limits", name), v, "must not be negative"))
		}
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return pol, nil
}

// Class is a node's state in one round.
type Class int

// Classes. Unknown nodes (stale, missing, expired or invalid metrics) are neither hot nor cold.
const (
	Unknown Class = iota
	Cold
	Normal
	Hot
)

func (c Class) String() string {
	switch c {
	case Cold:
		return "cold"
	case Normal:
		return "normal"
	case Hot:
		return "hot"
	}
	return "unknown"
}

// Classify says what a node is this round (before the anomaly rounds) and, for unknown, why;
// over lists the resources above their high threshold.
func (p *Policy) Classify(l *NodeLoad, now time.Time) (c Class, why string, over []Resource) {
	switch {
	case l == nil || !l.HasMetrics:
		return Unknown, "missing", nil
	case l.Invalid:
		return Unknown, "invalid", nil
	case l.Stale:
		return Unknown, "stale", nil
	case now.Sub(l.Updated) > p.Expiry:
		return Unknown, fmt.Sprintf("expired (newest sample %s old)", now.Sub(l.Updated).Round(time.Second)), nil
	}
	cold := true
	for _, r := range p.High.named() {
		if (r == CPU && !l.HasCPU) || (r == Memory && !l.HasMemory) {
			return Unknown, "missing " + string(r), nil
		}
		v := l.Usage.of(r)
		if v > p.High.of(r) {
			over = append(over, r)
		}
		if v >= p.Low.of(r) {
			cold = false
		}
	}
	switch {
	case len(over) > 0:
		return Hot, "", over
	case cold:
		return Cold, "", nil
	}
	return Normal, "", nil
}

// Anomalies counts each node's consecutive hot rounds: a node is acted on only once it has been
// hot for AnomalyRounds rounds in a row, so a spike moves nothing. Any other class (unknown
// included: no evidence is not evidence of heat) resets the count.
type Anomalies struct{ rounds map[string]int }

// Observe records this round's classes (nodes left out are forgotten) and returns each node's
// consecutive hot rounds.
func (a *Anomalies) Observe(classes map[string]Class) map[string]int {
	next := make(map[string]int, len(classes))
	for n, c := range classes {
		if c == Hot {
			next[n] = a.rounds[n] + 1
		}
	}
	a.rounds = next
	out := make(map[string]int, len(next))
	for n, v := range next {
		out[n] = v
	}
	return out
}
