package loadawaretest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// ScoreReserver is what BenchmarkScore drives: both load-aware plugins.
type ScoreReserver interface {
	fwk.ScorePlugin
	fwk.ReservePlugin
}

// BenchmarkScore measures one Score call on a node running 110 pods (the kubelet default
// maximum), in a 100-node snapshot, with 0 or 10 placed pods not yet reported by the agent.
// build makes a fresh plugin reading w; prepare (optional) runs once per cycle before the
// timed loop, as the framework runs PreScore.
func BenchmarkScore(b *testing.B, build func(b *testing.B, w *Watcher) ScoreReserver,
	prepare func(ctx context.Context, state fwk.CycleState, pod *v1.Pod) *fwk.Status) {
	nodes := map[string][]watcher.Metric{}
	for i := 0; i < 100; i++ {
		nodes[fmt.Sprintf("node-%d", i)] = []watcher.Metric{
			Metric(watcher.CPU, watcher.Average, 35), Metric(watcher.CPU, watcher.Std, 8),
			Metric(watcher.Memory, watcher.Average, 50), Metric(watcher.Memory, watcher.Std, 5),
		}
	}
	w := NewWatcher()
	defer w.Close()
	w.Set(Doc(time.Now(), nodes))
	pods := make([]*v1.Pod, 110)
	for i := range pods {
		pods[i] = Pod(fmt.Sprintf("running-%d", i), 100)
		pods[i].Spec.NodeName = "node-7"
	}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(Node("node-7", 32000, 128<<30))
	incoming := Pod("incoming", 250, 250)
	for _, placed := range []int{0, 10} {
		b.Run(fmt.Sprintf("pods=110/unreported=%d", placed), func(b *testing.B) {
			pl := build(b, w)
			for i := 0; i < placed; i++ {
				pl.Reserve(context.Background(), nil, Pod(fmt.Sprintf("placed-%d", i), 200), "node-7")
			}
			state := framework.NewCycleState()
			ctx := context.Background()
			if prepare != nil {
				if st := prepare(ctx, state, incoming); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, st := pl.Score(ctx, state, incoming, ni); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
	b.Run("nodes=1000/placed=2000/parallel", func(b *testing.B) { benchmarkParallelScore(b, build, prepare, incoming) })
}

// benchmarkParallelScore is the scheduler's shape: one cycle scores many nodes from parallel
// workers, each with a few pods placed since the last report (2000 pods over 1000 nodes).
func benchmarkParallelScore(b *testing.B, build func(b *testing.B, w *Watcher) ScoreReserver,
	prepare func(ctx context.Context, state fwk.CycleState, pod *v1.Pod) *fwk.Status, incoming *v1.Pod) {
	{
		const n = 1000
		metrics := map[string][]watcher.Metric{}
		infos := make([]*framework.NodeInfo, n)
		for i := range infos {
			name := fmt.Sprintf("big-node-%04d", i)
			metrics[name] = []watcher.Metric{
				Metric(watcher.CPU, watcher.Average, float64(10+i%60)), Metric(watcher.CPU, watcher.Std, 8),
				Metric(watcher.Memory, watcher.Average, 50), Metric(watcher.Memory, watcher.Std, 5),
			}
			infos[i] = framework.NewNodeInfo()
			infos[i].SetNode(Node(name, 4000, 32<<30))
		}
		big := NewWatcher()
		defer big.Close()
		big.Set(Doc(time.Now(), metrics))
		pl := build(b, big)
		for i := 0; i < 2*n; i++ {
			pl.Reserve(context.Background(), nil, Pod(fmt.Sprintf("placed-%d", i), 100), infos[i%n].Node().Name)
		}
		state := framework.NewCycleState()
		ctx := context.Background()
		if prepare != nil {
			if st := prepare(ctx, state, incoming); !st.IsSuccess() {
				b.Fatal(st)
			}
		}
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(p *testing.PB) {
			for p.Next() {
				i := next.Add(1) % n
				if _, st := pl.Score(ctx, state, incoming, infos[i]); !st.IsSuccess() {
					b.Error(st)
					return
				}
			}
		})
	}
}
