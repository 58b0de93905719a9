package loadvariationriskbalancing

import (
	"context"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// PreFilter tells the framework to skip Filter exactly when Filter could not refuse a node.
func TestPreFilterSkipsOnlyWhenFilterIsANoOp(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"n": 10}))
	cases := []struct {
		name      string
		extraArgs string
		want      fwk.Code
	}{
		{"default args: nothing to filter", "", fwk.Skip},
		{"usage thresholds", `,"usageThresholds":{"memory":90}`, fwk.Success},
		{"expired metrics blocked", `,"expiredMetricsAction":"Block"`, fwk.Success},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := newPlugin(t, w, tc.extraArgs, time.Now)
			res, st := pl.PreFilter(context.Background(), nil, lat.Pod("p", 100), nil)
			if res != nil || st.Code() != tc.want {
				t.Errorf("PreFilter = %v, %v; want nil, %v", res, st, tc.want)
			}
			if pl.PreFilterExtensions() != nil {
				t.Error("PreFilterExtensions must be nil: Filter keeps no per-cycle state")
			}
		})
	}
}
