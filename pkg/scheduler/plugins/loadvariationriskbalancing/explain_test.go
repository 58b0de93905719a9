package loadvariationriskbalancing

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// ExplainScore reports each resource's mean, deviation, allocatable, request and partial score
// the cycle scored from; the node's score is the lower partial one, rounded.
func TestExplainScoreGivesTheCyclesInputs(t *testing.T) {
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
	infos := map[string]*framework.NodeInfo{}
	var list []fwk.NodeInfo
	for _, tc := range tests {
		ni := framework.NewNodeInfo()
		ni.SetNode(lat.Node(tc.node, 4000, 16<<30))
		infos[tc.node] = ni
		list = append(list, ni)
	}
	state := framework.NewCycleState()
	if s := pl.PreScore(context.Background(), state, pod, list); !s.IsSuccess() {
		t.Fatal(s)
	}
	for _, tc := range tests {
		got, st := pl.Score(context.Background(), state, pod, infos[tc.node])
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		d, ok := pl.ExplainScore(context.Background(), state, pod, infos[tc.node]).(decisionapi.LoadDetail)
		if !ok {
			t.Fatalf("%s: no load detail", tc.node)
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
