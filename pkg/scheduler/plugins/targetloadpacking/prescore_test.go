package targetloadpacking

import (
	"testing"
	"time"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

func TestPreparedScoresMatchScore(t *testing.T) {
	lat.TestPreparedScoresMatchScore(t, func(t *testing.T, w *lat.Watcher) lat.PreScorer {
		return newPlugin(t, w, "", &clock{t: time.Now()})
	})
}
