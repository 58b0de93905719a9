package targetloadpacking

import (
	"math"
	"testing"

	"github.com/paypal/load-watcher/pkg/watcher"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// Upstream TargetLoadPacking reads an upstream document's CPU as the last AVG-or-Latest CPU
// metric in list order; the reading lives here, not in the shared engine.
func TestUpstreamCPU(t *testing.T) {
	m := lat.Metric
	tests := []struct {
		name   string
		ms     []watcher.Metric
		want   float64
		wantOK bool
	}{
		{"Berth's order reads the average", []watcher.Metric{m(watcher.CPU, watcher.Latest, 80), m(watcher.CPU, watcher.Average, 40), m(watcher.CPU, watcher.Std, 5)}, 40, true},
		{"a later Latest wins", []watcher.Metric{m(watcher.CPU, watcher.Average, 90), m(watcher.CPU, watcher.Std, 5), m(watcher.CPU, watcher.Latest, 0)}, 0, true},
		{"STD only reads nothing", []watcher.Metric{m(watcher.CPU, watcher.Std, 5)}, 0, false},
		{"memory is not CPU", []watcher.Metric{m(watcher.Memory, watcher.Average, 50)}, 0, false},
		{"non-finite ignored", []watcher.Metric{m(watcher.CPU, watcher.Average, 30), m(watcher.CPU, watcher.Latest, math.NaN())}, 30, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := UpstreamCPU(tc.ms)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("UpstreamCPU = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
