package sysched

import (
	"context"
	"strings"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

// ExplainScore gives the ExS terms of the score the cycle returned (upstream's z/x profiles: z
// has 91 syscalls, x one more), and the terms add up: ExS = |H∖P| + n·|H∪P| − Σ|S_q|. A pod
// placed on the node after scoring is named in a note.
func TestExplainScoreGivesTheCyclesInputs(t *testing.T) {
	args, err := ParseArgs(&Args{DefaultProfileNamespace: "default", DefaultProfileName: "full-seccomp"})
	if err != nil {
		t.Fatal(err)
	}
	z, x, full := upstreamProfiles("default")
	e := newEnv(t, shapeNamespaced, args, z, x, full)
	zPath, xPath := e.path("default", "z-seccomp"), e.path("default", "x-seccomp")
	e.pl.Reserve(context.Background(), nil, e.newPod("z", withPodProfile(zPath)), "zn")
	incoming := e.newPod("x", withPodProfile(xPath))

	cs := framework.NewCycleState()
	nodes := map[string]fwk.NodeInfo{"zn": nodeInfo("zn"), "empty": nodeInfo("empty")}
	if st := e.pl.PreScore(context.Background(), cs, incoming, []fwk.NodeInfo{nodes["zn"], nodes["empty"]}); !st.IsSuccess() {
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
		got, st := e.pl.Score(context.Background(), cs, incoming, nodes[tc.node])
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		plain, _, _ := e.scoreAll(incoming, []string{tc.node})
		d, ok := e.pl.ExplainScore(context.Background(), cs, incoming, nodes[tc.node]).(decisionapi.SySchedDetail)
		if !ok {
			t.Fatalf("%s: no detail", tc.node)
		}
		for _, n := range d.Notes {
			if strings.Contains(n, "changed between scoring") {
				t.Errorf("%s: %q with nothing changed", tc.node, n)
			}
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
	if got := e.pl.ExplainScore(context.Background(), cs, incoming, nodes["zn"]).(decisionapi.SySchedDetail).ExS; got != 2 {
		t.Errorf("x on a z node: ExS %d, upstream's vector says 2", got)
	}
	// A new cycle (scoreAll above ran others), then a pod comes to the node before the record.
	cs2 := framework.NewCycleState()
	if st := e.pl.PreScore(context.Background(), cs2, incoming, []fwk.NodeInfo{nodes["zn"], nodes["empty"]}); !st.IsSuccess() {
		t.Fatal(st)
	}
	e.pl.Reserve(context.Background(), nil, e.newPod("z2", withPodProfile(zPath)), "zn")
	d := e.pl.ExplainScore(context.Background(), cs2, incoming, nodes["zn"]).(decisionapi.SySchedDetail)
	if d.Pods != 2 || len(d.Notes) == 0 || !strings.Contains(d.Notes[len(d.Notes)-1], "changed between scoring") {
		t.Errorf("after a pod came to the node: pods %d, notes %q; want its two pods and a note saying so", d.Pods, d.Notes)
	}
}
