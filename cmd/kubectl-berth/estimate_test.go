package main

import (
	"bytes"
	"strings"
	"testing"
)

// explain prints where the pod's estimate came from, as the scheduler's record (decoded from
// JSON, as the CLI reads it) names it.
func TestExplainPrintsEstimateSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  map[string]any
		want string
	}{
		{"profile", map[string]any{"source": "profile", "workload": "demo/rs-uid@abc", "estimateMilliCPU": 165.0, "estimateMemoryBytes": 1048576.0,
			"percentileMilliCPU": 160.0, "spreadCPU": 0.03, "samples": 3.0, "ageSeconds": 4.0},
			"worker-1 TargetLoadPacking: measured 25 % of 8000m; + pod 0m + unreported 0m → 25 % (target 40 %); BerthAgent fresh sample 2s old; " +
				"pod estimate from profile demo/rs-uid@abc: 165m/1048576 B (p 160m, spread 0.03, 3 siblings, 4s old)"},
		{"spec", map[string]any{"source": "spec", "reason": "siblings not alike", "workload": "demo/rs-uid@abc", "samples": 3.0, "spreadCPU": 1.2},
			"; pod estimate from spec: siblings not alike (demo/rs-uid@abc, 3 siblings, spread 1.20)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := seed001(t)
			r.Nodes[0].Details["TargetLoadPacking"].(map[string]any)["podEstimate"] = tc.src
			var b bytes.Buffer
			if err := writeTable(&b, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("missing %q in\n%s", tc.want, b.String())
			}
		})
	}
}
