package imagelocality

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// BenchmarkCycle is one pod's scheduling cycle as the framework runs it: PreScore once, then
// Score on every node, at 1000 nodes holding 200 images each out of a catalogue of 400.
// ns/op is per cycle; divide by 1000 for per-node Score cost.
func BenchmarkCycle(b *testing.B) {
	const numNodes, perNode, catalogue = 1000, 200, 400
	ns := nodes(numNodes)
	tp := newTestPlugin(b, nil, ns)
	for i, n := range ns {
		imgs := make([]img, perNode)
		for j := range imgs {
			k := (i*7 + j*13) % catalogue
			imgs[j] = img{tags: []string{fmt.Sprintf("registry.local/team/app-%d:v1", k)}, size: int64(k+1) * mb}
		}
		tp.pl.Index().SetNodeImages(n.Name, nodeImagesObj(n.Name, imgs...))
	}
	p := pod("registry.local/team/app-7:v1", "registry.local/team/app-200:v1")
	all, _ := tp.h.Snapshot.NodeInfos().List()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cs := framework.NewCycleState()
		if st := tp.pl.PreScore(ctx, cs, p, all); !st.IsSuccess() {
			b.Fatal(st)
		}
		for _, ni := range all {
			if _, st := tp.pl.Score(ctx, cs, p, ni); !st.IsSuccess() {
				b.Fatal(st)
			}
		}
	}
}

// BenchmarkSetNodeImages is the cost of one inventory update of 5000 images (the CRD's cap).
func BenchmarkSetNodeImages(b *testing.B) {
	ix := NewIndex(0, true, nil)
	imgs := make([]img, 5000)
	for j := range imgs {
		imgs[j] = img{tags: []string{fmt.Sprintf("registry.local/team/app-%d:v1", j)},
			digests: []string{fmt.Sprintf("registry.local/team/app-%d@sha256:%064x", j, j)}, size: mb}
	}
	obj := nodeImagesObj("n0", imgs...)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ix.SetNodeImages("n0", obj)
	}
}

var _ = v1.Pod{}
