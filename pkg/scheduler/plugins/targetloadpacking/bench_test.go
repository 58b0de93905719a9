package targetloadpacking

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

func BenchmarkScore(b *testing.B) {
	var pl *TargetLoadPacking
	lat.BenchmarkScore(b, func(b *testing.B, w *lat.Watcher) lat.ScoreReserver {
		pl = newPlugin(b, w, "", &clock{t: time.Now()})
		return pl
	}, func(ctx context.Context, state fwk.CycleState, pod *v1.Pod) *fwk.Status {
		return pl.PreScore(ctx, state, pod, nil)
	})
}
