package workloadprofile

import (
	"errors"
	"fmt"
	"math"
	"time"

	configv1 "github.com/berth-sched/berth/api/config/v1"
)

// Args say when siblings are enough to estimate a pod from, and bound what is kept.
type Args struct {
	// MinSiblings is the fewest measured pods of a workload that make a profile (default 3).
	MinSiblings int
	// Percentile of the siblings' window averages the profile takes, in (0,100] (default 90):
	// high, so a new replica is not placed on the use of the workload's quietest pods.
	Percentile float64
	// MaxSpread is the largest coefficient of variation (standard deviation / mean) of the
	// siblings' averages, CPU or memory, for which they count as alike (default 0.5). Above
	// it the workload's pods differ too much to stand for each other: no profile.
	MaxSpread float64
	// Margin scales the spread into the estimate: profile × (1 + Margin × spread) (default 1).
	Margin float64
	// MaxWorkloads and MaxSamples bound memory: workloads kept (least recently measured out
	// first) and measured pods kept per workload (least recently measured out first).
	MaxWorkloads int
	MaxSamples   int
	// MinAge is how long a pod must have been bound before it is learned (default 1m): a
	// starting pod is not yet what it will use.
	MinAge time.Duration
	// MaxAge drops a pod's sample that has not been measured again for this long (a deleted
	// pod, an old template), so a profile says what the workload uses now (default 1h).
	MaxAge time.Duration
	// NamespaceMinPods is the fewest measured pods with a CPU request that make a namespace's
	// use-to-request ratio usable for its pods without a usable profile (default 0: off).
	// The namespace learner keeps NamespaceMaxSamples pods per namespace and MaxWorkloads
	// namespaces.
	NamespaceMinPods int
}

// DefaultArgs are the defaults named on Args.
func DefaultArgs() Args {
	return Args{MinSiblings: 3, Percentile: 90, MaxSpread: 0.5, Margin: 1,
		MaxWorkloads: 10000, MaxSamples: 64, MinAge: time.Minute, MaxAge: time.Hour,
		NamespaceMinPods: int(configv1.DefaultProfileNamespaceMinPods)}
}

// Validate says what is wrong with a, all at once.
func (a Args) Validate() error {
	var errs []error
	bad := func(name string, v any, want string) {
		errs = append(errs, fmt.Errorf("profiles.%s: %v: must be %s", name, v, want))
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	if a.MinSiblings < 1 || a.MinSiblings > 1000 {
		bad("minSiblings", a.MinSiblings, "between 1 and 1000")
	}
	if !finite(a.Percentile) || a.Percentile <= 0 || a.Percentile > 100 {
		bad("percentile", a.Percentile, "in (0,100]")
	}
	if !finite(a.MaxSpread) || a.MaxSpread < 0 || a.MaxSpread > 10 {
		bad("maxSpread", a.MaxSpread, "between 0 and 10")
	}
	if !finite(a.Margin) || a.Margin < 0 || a.Margin > 10 {
		bad("margin", a.Margin, "between 0 and 10")
	}
	if a.MaxWorkloads < 1 || a.MaxWorkloads > 1_000_000 {
		bad("maxWorkloads", a.MaxWorkloads, "between 1 and 1000000")
	}
	if a.MaxSamples < a.MinSiblings || a.MaxSamples > 10_000 {
		bad("maxSamples", a.MaxSamples, "between minSiblings and 10000")
	}
	if a.MaxAge <= 0 {
		bad("maxAge", a.MaxAge, "positive")
	}
	if a.MinAge < 0 || a.MinAge > time.Hour {
		bad("minAge", a.MinAge, "between 0 and 1h")
	}
	if a.NamespaceMinPods < 0 || a.NamespaceMinPods > NamespaceMaxSamples {
		bad("namespaceMinPods", a.NamespaceMinPods, fmt.Sprintf("between 0 and %d", NamespaceMaxSamples))
	}
	return errors.Join(errs...)
}

// FromConfig is the learner's Args from a profile's defaulted and validated configuration
// (api/config/v1), and whether profiles are on. nil: the defaults, on.
func FromConfig(c *configv1.WorkloadProfileArgs) (a Args, enabled bool) {
	a = DefaultArgs()
	if c == nil {
		return a, true
	}
	set := func(dst *int, v *int32) {
		if v != nil {
			*dst = int(*v)
		}
	}
	set(&a.MinSiblings, c.MinSiblings)
	set(&a.MaxWorkloads, c.MaxWorkloads)
	set(&a.MaxSamples, c.MaxSamples)
	set(&a.NamespaceMinPods, c.NamespaceMinPods)
	if c.Percentile != nil {
		a.Percentile = float64(*c.Percentile)
	}
	if c.MaxSpreadPercent != nil {
		a.MaxSpread = float64(*c.MaxSpreadPercent) / 100
	}
	if c.MarginPercent != nil {
		a.Margin = float64(*c.MarginPercent) / 100
	}
	if c.MaxAgeSeconds != nil {
		a.MaxAge = time.Duration(*c.MaxAgeSeconds) * time.Second
	}
	if c.MinAgeSeconds != nil {
		a.MinAge = time.Duration(*c.MinAgeSeconds) * time.Second
	}
	return a, c.Enabled == nil || *c.Enabled
}
