package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSimulatedNodesAreTainted(t *testing.T) {
	pool := corev1.Taint{Key: "pool", Value: "a", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name string
		spec NodeSpec
		want []corev1.Taint
	}{
		{"plain", NodeSpec{Name: "n"}, []corev1.Taint{SimulatedTaint}},
		{"own taints kept, simulated last", NodeSpec{Name: "n", Taints: []corev1.Taint{pool}}, []corev1.Taint{pool, SimulatedTaint}},
		{"simulated-only cluster", NodeSpec{Name: "n", WithoutSimulatedTaint: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NodeObject(tc.spec, false).Spec.Taints
			if len(got) != len(tc.want) {
				t.Fatalf("taints %v, want %v", got, tc.want)
			}
			for i := range got {
				if !got[i].MatchTaint(&tc.want[i]) || got[i].Value != tc.want[i].Value {
					t.Errorf("taint %d %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
	// SimulatedToleration names exactly SimulatedTaint.
	if tl := SimulatedToleration; tl.Key != SimulatedTaint.Key || tl.Operator != corev1.TolerationOpEqual || tl.Value != SimulatedTaint.Value || tl.Effect != SimulatedTaint.Effect {
		t.Errorf("SimulatedToleration %+v does not name %+v", tl, SimulatedTaint)
	}
	tols := TolerateSimulated([]corev1.Toleration{{Key: "pool", Operator: corev1.TolerationOpExists}})
	if len(tols) != 2 || len(TolerateSimulated(tols)) != 2 || len(TolerateSimulated([]corev1.Toleration{{Operator: corev1.TolerationOpExists}})) != 1 {
		t.Errorf("TolerateSimulated adds the toleration once, and not beside tolerate-everything: %v", tols)
	}
}
