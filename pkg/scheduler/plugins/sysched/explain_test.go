package sysched

import (
	"context"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/scheduler/decisionrecord/recordtest"
)

// In a recording cycle Score reports the ExS terms of the score it returns (upstream's z/x
// profiles: z has 91 syscalls, x one more), and the terms add up: ExS = |H∖P| + n·|H∪P| − Σ|S_q|.
func TestScoreDetailInRecordingCycle(t *testing.T) {
	args, err := ParseArgs(&Args{DefaultProfileNamespace: "default", DefaultProfileName: "full-seccomp"})
	if err != nil {
		t.Fatal(err)
	}
	z, x, full := upstreamProfiles("default")
	e := newEnv(t, shapeNamespaced, args, z, x, full)
	zPath, xPath := e.path("default", "z-seccomp"), e.path("default", "x-seccomp")
	e.pl.Reserve(context.Background(), nil, e.newPod("z", withPodProfile(zPath)), "zn")
	incoming := e.newPod("x", withPodProfile(xPath))

	sink := &recordtest.Sink{}
	cs := framework.NewCycleState()
	sink.Install(cs)
	if st := e.pl.PreScore(context.Background(), cs, incoming, nil); !st.IsSuccess() {
		t.Fatal(st)
	}
	tests := []struct {
		node string
		want decisionapi.SySchedDetail
	}{
		// z node: one pod, H = z's 91 syscalls; the ExS itself is checked against upstream's
		// vector below and against the terms.
		{"zn", decisionapi.SySchedDetail{Pods: 1, NodeSet: 91, PodSet: e.setSize(incoming), SumPodSet: 91}},
		{"empty", decisionapi.SySchedDetail{PodSet: e.setSize(incoming)}},
	}
	for _, tc := range tests {
		got, st := e.pl.Score(context.Background(), cs, incoming, nodeInfo(tc.node))
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		plain, _, _ := e.scoreAll(incoming, []string{tc.node})
		d, ok := sink.Got[Name][tc.node].(decisionapi.SySchedDetail)
		if !ok {
			t.Fatalf("%s: no detail %v", tc.node, sink.Got)
		}
		if d.ExS != got || got != plain[0] {
			t.Errorf("%s: detail ExS %d, score %d, score without recording %d", tc.node, d.ExS, got, plain[0])
		}
		if d.Pods != tc.want.Pods || d.NodeSet != tc.want.NodeSet || d.PodSet != tc.want.PodSet || d.SumPodSet != tc.want.SumPodSet {
			t.Errorf("%s: detail %+v, want %+v", tc.node, d, tc.want)
		}
		if d.Pods > 0 && int64(d.HMinusP)+int64(d.Pods)*int64(d.HUnionP)-d.SumPodSet != d.ExS {
			t.Errorf("%s: terms do not add up: %+v", tc.node, d)
		}
	}
	if got := sink.Got[Name]["zn"].(decisionapi.SySchedDetail).ExS; got != 2 {
		t.Errorf("x on a z node: ExS %d, upstream's vector says 2", got)
	}
}
