package targetloadpacking

import (
	"testing"

	"github.com/berth-sched/berth/pkg/scheduler/apis/config/configtest"
)

// FuzzTargetLoadPackingArgs feeds arbitrary JSON or YAML to ParseArgs (what the scheduler and
// the operator run on a user's configuration): it must never panic, what it accepts must be in
// range, and accepted args must survive an encode/parse round trip unchanged.
func FuzzTargetLoadPackingArgs(f *testing.F) {
	f.Add([]byte(`{"watcherAddress":"http://w:2020","targetUtilization":60,"defaultRequests":{"cpu":"500m"},"defaultRequestsMultiplier":"2"}`), false)
	f.Add([]byte("watcherAddress: http://w:2020\nusageThresholds: {cpu: 80}\nexpiredMetricsAction: Block\n"), true)
	f.Add([]byte(`{"watcherAddress":"http://w","defaultRequestsMultiplier":"NaN","targetUtilization":-1}`), false)
	f.Fuzz(func(t *testing.T, data []byte, yaml bool) {
		configtest.RoundTrip(t, ParseArgs, data, yaml, func(t *testing.T, a *TargetLoadPackingArgs) {
			if u := *a.TargetUtilization; u < 1 || u > 100 {
				t.Fatalf("accepted targetUtilization %d", u)
			}
			if m, err := parseMultiplier(*a.DefaultRequestsMultiplier); err != nil || m <= 0 {
				t.Fatalf("accepted multiplier %q: %v", *a.DefaultRequestsMultiplier, err)
			}
			if *a.NeutralScore < 0 || *a.NeutralScore > 100 {
				t.Fatalf("accepted neutralScore %d", *a.NeutralScore)
			}
		}, nil)
	})
}
