package loadvariationriskbalancing

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/scheduler/decisionrecord/recordtest"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// In a recording cycle Score reports each resource's mean, deviation, allocatable, request
// and partial score; the node's score is the lower partial one, rounded, and the same as in a
// cycle that does not record.
func TestScoreDetailInRecordingCycle(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	now := time.Now()
	w.Set(lat.Doc(now, map[string][]watcher.Metric{
		"both": {lat.Metric(watcher.CPU, watcher.Average, 40), lat.Metric(watcher.CPU, watcher.Std, 10),
			lat.Metric(watcher.Memory, watcher.Average, 20), lat.Metric(watcher.Memory, watcher.Std, 5)},
		"cpu-only": {lat.Metric(watcher.CPU, watcher.Average, 70), lat.Metric(watcher.CPU, watcher.Std, 0)},
	}))
	pl := newPlugin(t, w, "", func() time.Time { return now })
	pod := podWith("p", 1000, 1<<30)
	sink := &recordtest.Sink{}
	recording, quiet := framework.NewCycleState(), framework.NewCycleState()
	sink.Install(recording)
	for _, st := range []*framework.CycleState{recording, quiet} {
		if s := pl.PreScore(context.Background(), st, pod, nil); !s.IsSuccess() {
			t.Fatal(s)
		}
	}
	tests := []struct {
		node             string
		cpuAvg, memAvg   float64
		wantCPU, wantMem bool
		neutral          bool
	}{
		{node: "both", cpuAvg: 40, memAvg: 20, wantCPU: true, wantMem: true},
		{node: "cpu-only", cpuAvg: 70, wantCPU: true},
		{node: "unknown", neutral: true},
	}
	for _, tc := range tests {
		ni := framework.NewNodeInfo()
		ni.SetNode(lat.Node(tc.node, 4000, 16<<30))
		got, st := pl.Score(context.Background(), recording, pod, ni)
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		if plain, _ := pl.Score(context.Background(), quiet, pod, ni); plain != got {
			t.Errorf("%s: recording changed the score %d → %d", tc.node, plain, got)
		}
		d, ok := sink.Got[Name][tc.node].(decisionapi.LoadDetail)
		if !ok {
			t.Fatalf("%s: no detail %v", tc.node, sink.Got)
		}
		if d.Neutral != tc.neutral || d.CPU.Valid != tc.wantCPU || d.Memory.Valid != tc.wantMem {
			t.Fatalf("%s: detail %+v", tc.node, d)
		}
		if tc.neutral {
			continue
		}
		low := math.Inf(1)
		for _, r := range []decisionapi.RiskTerms{d.CPU, d.Memory} {
			if !r.Valid {
				continue
			}
			// Redo the formula from the recorded terms.
			redo := ComputeScore(r.Margin, r.Sensitivity, ResourceStats{Capacity: r.Allocatable, Req: r.Request,
				UsedAvg: r.AvgPercent / 100 * r.Allocatable, UsedStdev: r.StdPercent / 100 * r.Allocatable})
			if math.Abs(redo-r.Score) > 1e-9 {
				t.Errorf("%s: term score %v, redone %v", tc.node, r.Score, redo)
			}
			low = math.Min(low, r.Score)
		}
		if d.CPU.AvgPercent != tc.cpuAvg || d.CPU.Allocatable != 4000 || d.CPU.Request != 1000 {
			t.Errorf("%s: cpu terms %+v", tc.node, d.CPU)
		}
		if loadaware.RoundScore(low) != got {
			t.Errorf("%s: score %d, lower recorded term %v", tc.node, got, low)
		}
	}
}
