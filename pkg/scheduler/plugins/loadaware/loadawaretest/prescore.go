package loadawaretest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// PreScorer is a load-aware plugin as the framework drives it in a cycle.
type PreScorer interface {
	fwk.PreScorePlugin
	ScoreReserver
}

// TestPreparedScoresMatchScore runs cycles of pods of different sizes, each reserved on a node
// as the scheduler would: in every cycle the scores Score returns after PreScore (prepared
// through the engine's memo) equal the scores Score computes on a state PreScore never saw.
// build makes the plugin reading w.
func TestPreparedScoresMatchScore(t *testing.T, build func(t *testing.T, w *Watcher) PreScorer) {
	w := NewWatcher()
	defer w.Close()
	metrics := map[string][]watcher.Metric{}
	var infos []fwk.NodeInfo
	for i := 0; i < 8; i++ {
		name := fmt.Sprintf("node-%d", i)
		metrics[name] = []watcher.Metric{
			Metric(watcher.CPU, watcher.Average, float64(10*i)), Metric(watcher.CPU, watcher.Std, float64(i)),
			Metric(watcher.Memory, watcher.Average, float64(5*i)), Metric(watcher.Memory, watcher.Std, 2),
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(Node(name, int64(2000+1000*(i%3)), int64(4+i)<<30))
		infos = append(infos, ni)
	}
	w.Set(Doc(time.Now(), metrics))
	pl := build(t, w)
	ctx := context.Background()
	sizes := []int64{100, 100, 100, 700, 700, 100, 1500, 100}
	for cycle, size := range sizes {
		pod := Pod(fmt.Sprintf("p-%d", cycle), size)
		state := framework.NewCycleState()
		if st := pl.PreScore(ctx, state, pod, infos); !st.IsSuccess() {
			t.Fatalf("cycle %d: PreScore: %v", cycle, st)
		}
		best, bestScore := "", int64(-1)
		for _, ni := range infos {
			got, st := pl.Score(ctx, state, pod, ni)
			if !st.IsSuccess() {
				t.Fatalf("cycle %d: Score: %v", cycle, st)
			}
			want, st := pl.Score(ctx, framework.NewCycleState(), pod, ni)
			if !st.IsSuccess() {
				t.Fatalf("cycle %d: Score without PreScore: %v", cycle, st)
			}
			if got != want {
				t.Errorf("cycle %d (%dm pod): node %s scored %d after PreScore, %d without", cycle, size, ni.Node().Name, got, want)
			}
			if got > bestScore {
				best, bestScore = ni.Node().Name, got
			}
		}
		if st := pl.Reserve(ctx, state, pod, best); !st.IsSuccess() {
			t.Fatalf("cycle %d: Reserve: %v", cycle, st)
		}
	}
}
