package targetloadpacking

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
)

// ExplainScore gives exactly the inputs of the score the cycle returned (seed 001's nodes, a
// 100m pod, a placed-but-unreported pod on one node, a node the watcher does not know), even
// after the load changed: it reads the state the cycle scored the node from.
func TestExplainScoreGivesTheCyclesInputs(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	clk := &clock{t: time.Now()}
	w.Set(lat.CPUDoc(clk.Now(), map[string]float64{"worker-1": 25, "worker-2": 50}))
	pl := newPlugin(t, w, `,"targetUtilization":40`, clk)
	clk.Add(3 * time.Second)
	pl.Reserve(context.Background(), nil, lat.Pod("placed", 400), "worker-2")
	unreported := pl.PredictedMilliCPU(lat.Pod("placed", 400))
	pod := lat.Pod("p", 100)
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}

	tests := []struct {
		node string
		want decisionapi.LoadDetail
	}{
		{"worker-1", decisionapi.LoadDetail{Freshness: "fresh", Source: "test", AgeSeconds: 3, MeasuredPercent: 25,
			CapacityMilliCPU: 8000, PodMilliCPU: 100, PredictedPercent: 26.25, TargetPercent: 40}},
		{"worker-2", decisionapi.LoadDetail{Freshness: "fresh", Source: "test", AgeSeconds: 3, MeasuredPercent: 50,
			CapacityMilliCPU: 8000, PodMilliCPU: 100, PredictedPercent: 100 * float64(4000+100+unreported) / 8000, TargetPercent: 40,
			UnreportedMilliCPU: unreported}},
		{"worker-9", decisionapi.LoadDetail{Freshness: "missing", Source: "test", Neutral: true}},
	}
	infos := map[string]*framework.NodeInfo{}
	var list []fwk.NodeInfo
	for _, tc := range tests {
		infos[tc.node] = nodeInfo(lat.Node(tc.node, 8000, 32<<30))
		list = append(list, infos[tc.node])
	}
	state := framework.NewCycleState()
	if st := pl.PreScore(context.Background(), state, pod, list); !st.IsSuccess() {
		t.Fatal(st)
	}
	scores := map[string]int64{}
	for _, tc := range tests {
		got, st := pl.Score(context.Background(), state, pod, infos[tc.node])
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		scores[tc.node] = got
	}
	// The load moves after scoring: the explanation is still of the cycle's inputs.
	w.Set(lat.CPUDoc(clk.Now(), map[string]float64{"worker-1": 90, "worker-2": 5}))
	if err := pl.engine.Watcher.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		got := scores[tc.node]
		d, ok := pl.ExplainScore(context.Background(), state, pod, infos[tc.node]).(decisionapi.LoadDetail)
		if !ok {
			t.Fatalf("%s: no load detail", tc.node)
		}
		// The sample time is the document's (the recorder turns it into an age); unknown nodes
		// have none.
		if age := clk.Now().Sub(d.SampledAt).Seconds(); (tc.want.AgeSeconds > 0 && math.Abs(age-tc.want.AgeSeconds) > 1) || (tc.want.AgeSeconds == 0 && !d.SampledAt.IsZero()) {
			t.Errorf("%s: sampled at %v (age %v), want age %v", tc.node, d.SampledAt, age, tc.want.AgeSeconds)
		}
		if math.Abs(d.PredictedPercent-tc.want.PredictedPercent) > 1e-9 {
			t.Errorf("%s: predicted %v, want %v", tc.node, d.PredictedPercent, tc.want.PredictedPercent)
		}
		d.PredictedPercent, d.AgeSeconds, d.SampledAt = tc.want.PredictedPercent, tc.want.AgeSeconds, time.Time{}
		// A bare pod: the record says its estimate is the spec rule's, and why.
		tc.want.PodEstimate = decisionapi.EstimateSource{Source: decisionapi.EstimateFromSpec, Reason: loadaware.ReasonNoController}
		if !reflect.DeepEqual(d, tc.want) {
			t.Errorf("%s: detail %+v\nwant      %+v", tc.node, d, tc.want)
		}
		// The detail is enough to redo the score by hand.
		if !d.Neutral {
			redo := loadaware.RoundScore(ScoreForUtilization(float64(d.TargetPercent),
				PredictedUtilization(d.MeasuredPercent, d.CapacityMilliCPU, d.PodMilliCPU+d.UnreportedMilliCPU)))
			if redo != got {
				t.Errorf("%s: score %d, redone from the detail %d", tc.node, got, redo)
			}
		} else if got != pl.engine.NeutralScore() {
			t.Errorf("%s: neutral detail but score %d", tc.node, got)
		}
	}
}
