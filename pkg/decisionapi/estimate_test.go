package decisionapi

import (
	"strings"
	"testing"
)

// The input line of a load-aware node says where the pod's estimate came from, as the
// scheduler holds the record and as a client decodes it.
func TestInputLineNamesEstimateSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  EstimateSource
		want string
	}{
		{"profile", EstimateSource{Source: EstimateFromProfile, Workload: "a/rs-uid@h1", EstimateMilliCPU: 220, EstimateMemoryBytes: 1 << 20,
			PercentileMilliCPU: 200, SpreadCPU: 0.1, Samples: 3, AgeSeconds: 12},
			"; pod estimate from profile a/rs-uid@h1: 220m/1048576 B (p 200m, spread 0.10, 3 siblings, 12s old)"},
		{"profile with ramp", EstimateSource{Source: EstimateFromProfile, Workload: "a/rs-uid@h1", EstimateMilliCPU: 220, EstimateMemoryBytes: 1 << 20,
			PercentileMilliCPU: 200, SpreadCPU: 0.1, Samples: 3, AgeSeconds: 12, RampSeconds: 95},
			"(p 200m, spread 0.10, 3 siblings, reached in 95s, 12s old)"},
		{"unlike siblings", EstimateSource{Source: EstimateFromSpec, Reason: "siblings not alike", Workload: "a/rs-uid@h1", Samples: 3, SpreadCPU: 1.4},
			"; pod estimate from spec: siblings not alike (a/rs-uid@h1, 3 siblings, spread 1.40)"},
		{"bare pod", EstimateSource{Source: EstimateFromSpec, Reason: "no controlling owner"}, "; pod estimate from spec: no controlling owner"},
		{"bare pod from its namespace", EstimateSource{Source: EstimateFromNamespace, Reason: "no controlling owner",
			Namespace: &NamespaceRatio{Mean: 0.2, SD: 0.1, Pods: 12, AgeSeconds: 3, RequestMilliCPU: 1000, EstimateMilliCPU: 300}},
			"; pod estimate from namespace: no controlling owner; namespace uses 0.20 ± 0.10 of its CPU request (12 pods, 3s old): 300m of 1000m"},
		{"too few in the namespace", EstimateSource{Source: EstimateFromSpec, Reason: "no controlling owner",
			Namespace: &NamespaceRatio{Mean: 0.2, SD: 0.1, Pods: 4, AgeSeconds: 3, RequestMilliCPU: 1000, EstimateMilliCPU: 300}},
			"; pod estimate from spec: no controlling owner; namespace uses 0.20 ± 0.10 of its CPU request (4 pods, 3s old)"},
		{"not said", EstimateSource{}, "BerthAgent fresh sample 2s old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := seed001()
			d := r.Nodes[0].Details["TargetLoadPacking"].(LoadDetail)
			d.PodEstimate = tc.src
			r.Nodes[0].Details["TargetLoadPacking"] = d
			for _, rr := range []Record{r, jsonRoundTrip(t, r)} {
				if got := rr.Nodes[0].InputLines()[0]; !strings.HasSuffix(got, tc.want) {
					t.Errorf("line %q does not end with %q", got, tc.want)
				}
			}
		})
	}
}
