package instanceisolation

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// BenchmarkFilter is one Filter call on a node holding podsPerNode pods of the incoming pod's
// class (the accepting path, which checks every rule) or of another class (the refusing
// path). The NodeInfo holds the same pods, so the index's pod total matches the snapshot and
// Filter takes the O(1) path. Its cost must not grow with podsPerNode.
func BenchmarkFilter(b *testing.B) {
	for _, podsPerNode := range []int{1, 100, 10000} {
		for _, incoming := range []string{"a", "b"} {
			b.Run(fmt.Sprintf("podsPerNode=%d/incoming=%s", podsPerNode, incoming), func(b *testing.B) {
				pl := newTestPlugin(b, &Args{Strict: boolp(true), SpreadReplicas: boolp(true)})
				h := pl.PodHandler()
				pods := make([]*v1.Pod, podsPerNode)
				for i := range pods {
					pods[i] = newPod(fmt.Sprint("t", i%7)).class("a").owned("ReplicaSet", fmt.Sprint("rs", i)).on("n1").pod()
					h.OnAdd(pods[i], false)
				}
				ctx := context.Background()
				pod := newPod("t1").class(incoming).owned("ReplicaSet", "new").pod()
				cs := framework.NewCycleState()
				if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSuccess() {
					b.Fatal(s)
				}
				ni := nodeInfo("n1", pods...)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					s := pl.Filter(ctx, cs, pod, ni)
					if s.IsSuccess() != (incoming == "a") {
						b.Fatal(s)
					}
				}
			})
		}
	}
}

// BenchmarkFilterParallel is Filter as the scheduler calls it: from 16 goroutines at once
// over many nodes (the framework's parallelism), so read-side contention on the index shows.
func BenchmarkFilterParallel(b *testing.B) {
	const nodes = 1000
	pl := newTestPlugin(b, nil)
	h := pl.PodHandler()
	nis := make([]fwk.NodeInfo, nodes)
	for n := 0; n < nodes; n++ {
		name := fmt.Sprintf("n%04d", n)
		var pods []*v1.Pod
		for i := 0; i < 2; i++ {
			p := newPod("t1").class(fmt.Sprint("c", n%50)).on(name).pod()
			h.OnAdd(p, false)
			pods = append(pods, p)
		}
		nis[n] = nodeInfo(name, pods...)
	}
	ctx := context.Background()
	pod := newPod("t1").class("c7").pod()
	cs := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSuccess() {
		b.Fatal(s)
	}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_ = pl.Filter(ctx, cs, pod, nis[i%nodes])
			i++
		}
	})
}
