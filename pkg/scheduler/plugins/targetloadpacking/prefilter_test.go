package targetloadpacking

import (
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

func TestPreFilterSkipsOnlyWhenFilterIsANoOp(t *testing.T) {
	lat.TestPreFilterSkipsOnlyWhenFilterIsANoOp(t, func(t *testing.T, w *lat.Watcher, extraArgs string) fwk.PreFilterPlugin {
		return newPlugin(t, w, extraArgs, &clock{t: time.Now()})
	})
}
