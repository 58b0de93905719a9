package loadvariationriskbalancing

import (
	"math"
	"testing"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config/configtest"
)

// FuzzLoadVariationRiskBalancingArgs: ParseArgs on arbitrary JSON or YAML never panics, accepts
// only finite non-negative margin and sensitivity, and accepted args survive a round trip.
func FuzzLoadVariationRiskBalancingArgs(f *testing.F) {
	f.Add([]byte(`{"watcherAddress":"http://w:2020","safeVarianceMargin":1.5,"safeVarianceSensitivity":0}`), false)
	f.Add([]byte("watcherAddress: http://w:2020\nsafeVarianceMargin: .inf\n"), true)
	f.Add([]byte(`{"watcherAddress":"http://w","safeVarianceMargin":-1,"metricsExpirySeconds":0}`), false)
	f.Fuzz(func(t *testing.T, data []byte, yaml bool) {
		configtest.RoundTrip(t, ParseArgs, data, yaml, func(t *testing.T, a *LoadVariationRiskBalancingArgs) {
			for _, d := range []configv1.Decimal{*a.SafeVarianceMargin, *a.SafeVarianceSensitivity} {
				if v, err := d.Float64(); err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Fatalf("accepted %q", d)
				}
			}
		}, nil)
	})
}
