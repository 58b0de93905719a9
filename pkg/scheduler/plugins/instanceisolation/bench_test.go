package instanceisolation

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

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
