package placement

import (
	"encoding/json"
	"testing"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

func TestOracleChoose(t *testing.T) {
	sc := &Scenario{
		Nodes: []NodeSpec{
			{Name: "small", MilliCPU: 4000, MemoryMiB: 8192, BaseCPU: 10},
			{Name: "big", MilliCPU: 16000, MemoryMiB: 8192, BaseCPU: 20},
		},
		Pods: []PodSpec{
			{Name: "light", ReqMilliCPU: 1000, ReqMemMiB: 100, UseMilliCPU: 100},
			{Name: "heavy", ReqMilliCPU: 1000, ReqMemMiB: 100, UseMilliCPU: 2000},
			{Name: "wide", ReqMilliCPU: 3500, ReqMemMiB: 100, UseMilliCPU: 100},
			{Name: "huge", ReqMilliCPU: 20000, ReqMemMiB: 100, UseMilliCPU: 100},
			{Name: "swing", ReqMilliCPU: 100, ReqMemMiB: 100, UseMilliCPU: 100, BurstMilliCPU: 400},
		},
	}
	tests := []struct {
		name   string
		before []string // bound first, in order
		forget []string
		sigmas float64
		pod    string
		want   string
	}{
		// small: 10 + 2.5 = 12.5 %, big: 20 + 0.6 = 20.6 %.
		{name: "lowest true load in percent of the node", pod: "light", want: "small"},
		// small: 10 + 52.5 = 62.5 %, big: 20 + 13.1 = 33.1 %: its true use decides, not its request.
		{name: "a heavy pod goes where it weighs least", pod: "heavy", want: "big"},
		// After light on small (12.5 %), wide's request no longer fits small's 4 CPUs.
		{name: "requests must fit", before: []string{"light"}, pod: "wide", want: "big"},
		{name: "a forgotten pod frees its requests", before: []string{"light"}, forget: []string{"light"}, pod: "wide", want: "small"},
		// Mean only: small 10 + 2.5 = 12.5 %, big 20 + 0.6 = 20.6 %. With 3σ (1200m): small
		// 12.5 + 30 = 42.5 %, big 20.6 + 7.5 = 28.1 %.
		{name: "mean only: a swinging pod goes to the lower mean", pod: "swing", want: "small"},
		{name: "with 3σ it goes where its swing weighs least", sigmas: 3, pod: "swing", want: "big"},
		{name: "fits nowhere", pod: "huge", want: ""},
		{name: "not a scenario pod", pod: "agent-x", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle(sc, tc.sigmas)
			for _, p := range tc.before {
				o.choose(p)
			}
			for _, p := range tc.forget {
				o.forget(p)
			}
			if got := o.choose(tc.pod); got != tc.want {
				t.Errorf("choose(%s) = %q, want %q", tc.pod, got, tc.want)
			}
		})
	}
}

// TestPredicted: TargetLoadPacking's prediction is read from a record as a client decodes it
// (details as JSON maps); a neutral score or another plugin's detail gives none.
func TestPredicted(t *testing.T) {
	var rec decisionapi.Record
	doc := `{"nodes":[
	  {"node":"a","feasible":true,"details":{"TargetLoadPacking":{"freshness":"fresh","predictedPercent":62.5}}},
	  {"node":"b","feasible":true,"details":{"TargetLoadPacking":{"freshness":"missing","neutral":true}}},
	  {"node":"c","feasible":true,"details":{"SySched":{"exs":3}}}]}`
	if err := json.Unmarshal([]byte(doc), &rec); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		pred float64
		ok   bool
	}{{62.5, true}, {0, false}, {0, false}}
	for i, n := range rec.Nodes {
		if pred, ok := predicted(n); pred != want[i].pred || ok != want[i].ok {
			t.Errorf("%s: predicted %v %v, want %v %v", n.Node, pred, ok, want[i].pred, want[i].ok)
		}
	}
}
