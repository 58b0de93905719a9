package targetloadpacking

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// BenchmarkScore measures one Score call on a node running 110 pods (the kubelet default
// maximum), in a 100-node snapshot, with 0 or 10 placed pods not yet reported by the agent.
func BenchmarkScore(b *testing.B) {
	m := lat.Metric
	nodes := map[string][]watcher.Metric{}
	for i := 0; i < 100; i++ {
		nodes[fmt.Sprintf("node-%d", i)] = []watcher.Metric{
			m(watcher.CPU, watcher.Average, 35), m(watcher.CPU, watcher.Std, 8),
			m(watcher.Memory, watcher.Average, 50), m(watcher.Memory, watcher.Std, 5),
		}
	}
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.Doc(time.Now(), nodes))
	pods := make([]*v1.Pod, 110)
	for i := range pods {
		pods[i] = lat.Pod(fmt.Sprintf("running-%d", i), 100)
		pods[i].Spec.NodeName = "node-7"
	}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(lat.Node("node-7", 32000, 128<<30))
	incoming := lat.Pod("incoming", 250, 250)
	for _, placed := range []int{0, 10} {
		b.Run(fmt.Sprintf("pods=110/unreported=%d", placed), func(b *testing.B) {
			pl := newPlugin(b, w, "", &clock{t: time.Now()})
			for i := 0; i < placed; i++ {
				pl.Reserve(context.Background(), nil, lat.Pod(fmt.Sprintf("placed-%d", i), 200), "node-7")
			}
			state := framework.NewCycleState()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, st := pl.Score(ctx, state, incoming, ni); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}
