package decisionrecord

import (
	"context"
	"fmt"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// BenchmarkCycle runs one scheduling cycle's framework calls (PreFilter, Filter on every node,
// Score with one plugin reporting details, result) over 1000 nodes, with the framework as
// configured (off) and wrapped by the recorder (on): the recorder's cost per pod.
func BenchmarkCycle(b *testing.B) {
	names := make([]string, 1000)
	refuse := map[string]string{}
	for i := range names {
		names[i] = fmt.Sprintf("node-%04d", i)
		if i%10 == 0 {
			refuse[names[i]] = "full"
		}
	}
	t := &testing.T{}
	f := newFixture(t, refuse, names, 1000, 10)
	// Scores within [0, 100] whatever the node count.
	for i, n := range names {
		f.scores[0].raw[n], f.scores[1].raw[n] = int64(i%100), int64(100-i%100)
	}
	unwrapped := f.fw.(*recordingFramework).Framework
	for _, tc := range []struct {
		name string
		fw   framework.Framework
	}{{"recording=off", unwrapped}, {"recording=on", f.fw}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				p := pod(fmt.Sprintf("p%d", i))
				state := framework.NewCycleState()
				if _, st, _ := tc.fw.RunPreFilterPlugins(ctx, state, p); !st.IsSuccess() {
					b.Fatal(st)
				}
				feasible := make([]fwk.NodeInfo, 0, len(f.nodes))
				for _, n := range f.nodes {
					if st := tc.fw.RunFilterPluginsWithNominatedPods(ctx, state, p, n); st.IsSuccess() {
						feasible = append(feasible, n)
					}
				}
				if _, st := tc.fw.RunScorePlugins(ctx, state, p, feasible); !st.IsSuccess() {
					b.Fatal(st)
				}
				if a := attemptFrom(state); a != nil {
					a.result(feasible[0].Node().Name, false, nil)
				}
			}
		})
	}
}
