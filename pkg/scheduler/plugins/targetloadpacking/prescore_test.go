package targetloadpacking

import (
	"testing"
	"time"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

func TestPreparedScoresMatchScore(t *testing.T) {
	// why the margin case: its headroom term reads the snapshot's deviation, which the memo
	// must treat as an input like the average.
	for name, args := range map[string]string{"upstream": "", "variance margin": `,"varianceMargin":"1.5"`} {
		t.Run(name, func(t *testing.T) {
			lat.TestPreparedScoresMatchScore(t, func(t *testing.T, w *lat.Watcher) lat.PreScorer {
				return newPlugin(t, w, args, &clock{t: time.Now()})
			})
		})
	}
}
