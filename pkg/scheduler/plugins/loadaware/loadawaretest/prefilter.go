package loadawaretest

import (
	"context"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
)

// TestPreFilterSkipsOnlyWhenFilterIsANoOp checks a load-aware plugin's PreFilter: the framework
// is told to skip Filter exactly when Filter could not refuse a node. build makes the plugin
// with extraArgs appended to its JSON args, reading w.
func TestPreFilterSkipsOnlyWhenFilterIsANoOp(t *testing.T, build func(t *testing.T, w *Watcher, extraArgs string) fwk.PreFilterPlugin) {
	w := NewWatcher()
	defer w.Close()
	w.Set(CPUDoc(time.Now(), map[string]float64{"n": 10}))
	cases := []struct {
		name      string
		extraArgs string
		want      fwk.Code
	}{
		{"default args: nothing to filter", "", fwk.Skip},
		{"cpu usage threshold", `,"usageThresholds":{"cpu":80}`, fwk.Success},
		{"memory usage threshold", `,"usageThresholds":{"memory":90}`, fwk.Success},
		{"expired metrics blocked", `,"expiredMetricsAction":"Block"`, fwk.Success},
		{"expired metrics neutral", `,"expiredMetricsAction":"Neutral"`, fwk.Skip},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := build(t, w, tc.extraArgs)
			res, st := pl.PreFilter(context.Background(), nil, Pod("p", 100), nil)
			if res != nil || st.Code() != tc.want {
				t.Errorf("PreFilter = %v, %v; want nil, %v", res, st, tc.want)
			}
			if pl.PreFilterExtensions() != nil {
				t.Error("PreFilterExtensions must be nil: Filter keeps no per-cycle state")
			}
		})
	}
}
