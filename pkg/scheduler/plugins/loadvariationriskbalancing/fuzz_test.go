package loadvariationriskbalancing

import (
	"math"
	"testing"

	"github.com/berth-sched/berth/pkg/scheduler/pluginargs/pluginargstest"
)

// FuzzLoadVariationRiskBalancingArgs: ParseArgs on arbitrary JSON or YAML never panics, accepts
// only finite non-negative margin and sensitivity, and accepted args survive a round trip.
func FuzzLoadVariationRiskBalancingArgs(f *testing.F) {
	f.Add([]byte(`{"watcherAddress":"http://w:2020","safeVarianceMargin":1.5,"safeVarianceSensitivity":0}`), false)
	f.Add([]byte("watcherAddress: http://w:2020\nsafeVarianceMargin: .inf\n"), true)
	f.Add([]byte(`{"watcherAddress":"http://w","safeVarianceMargin":-1,"metricsExpirySeconds":0}`), false)
	f.Fuzz(func(t *testing.T, data []byte, yaml bool) {
		pluginargstest.RoundTrip(t, ParseArgs, data, yaml, func(t *testing.T, a *LoadVariationRiskBalancingArgs) {
			for _, v := range []float64{*a.SafeVarianceMargin, *a.SafeVarianceSensitivity} {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Fatalf("accepted %v", v)
				}
			}
		}, nil)
	})
}
