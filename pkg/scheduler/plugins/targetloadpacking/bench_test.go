package targetloadpacking

import (
	"testing"
	"time"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

func BenchmarkScore(b *testing.B) {
	lat.BenchmarkScore(b, func(b *testing.B, w *lat.Watcher) lat.ScoreReserver {
		return newPlugin(b, w, "", &clock{t: time.Now()})
	}, nil)
}
