package instanceisolation

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// BenchmarkFilter is one Filter call on a node holding podsPerNode pods of the incoming pod's
// class (the accepting path, which checks every rule) or of another class (the refusing
// path). Its cost must not grow with podsPerNode: the index keeps counts, not pods.
func BenchmarkFilter(b *testing.B) {
	for _, podsPerNode := range []int{1, 100, 10000} {
		for _, incoming := range []string{"a", "b"} {
			b.Run(fmt.Sprintf("podsPerNode=%d/incoming=%s", podsPerNode, incoming), func(b *testing.B) {
				pl := newTestPlugin(b, &Args{Strict: boolp(true), SpreadReplicas: boolp(true)})
				h := pl.PodHandler()
				for i := 0; i < podsPerNode; i++ {
					h.OnAdd(newPod(fmt.Sprint("t", i%7)).class("a").owned("ReplicaSet", fmt.Sprint("rs", i)).on("n1").pod(), false)
				}
				ctx := context.Background()
				pod := newPod("t1").class(incoming).owned("ReplicaSet", "new").pod()
				cs := framework.NewCycleState()
				if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSuccess() {
					b.Fatal(s)
				}
				ni := nodeInfo("n1")
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
