package decisionapi

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// seed001 is a record as the scheduler serves it: three scored nodes with TargetLoadPacking
// details, one refused node.
func seed001() Record {
	tlp := func(measured, predicted float64) LoadDetail {
		return LoadDetail{Freshness: "fresh", Source: "BerthAgent", AgeSeconds: 2, MeasuredPercent: measured,
			CapacityMilliCPU: 8000, PredictedPercent: predicted, TargetPercent: 40}
	}
	node := func(name string, raw int64, d LoadDetail) NodeRecord {
		return NodeRecord{Node: name, Feasible: true, Total: raw + 50,
			Scores:  []PluginScore{{Plugin: "TargetLoadPacking", Raw: raw, Normalized: raw, Weight: 1, Weighted: raw}, {Plugin: "SySched", Raw: 3, Normalized: 50, Weight: 1, Weighted: 50}},
			Details: map[string]any{"TargetLoadPacking": d, "SySched": SySchedDetail{ExS: 3, Pods: 1, NodeSet: 10, PodSet: 9, HMinusP: 1, HUnionP: 12, SumPodSet: 10}}}
	}
	r := Record{Namespace: "demo", Name: "empty", UID: "u1", Profile: "berth-scheduler", Attempts: 1, Outcome: OutcomeScheduled,
		Chosen: "worker-1", Weights: map[string]int{"TargetLoadPacking": 1, "SySched": 1}, Feasible: 3, Refused: 1,
		Nodes: []NodeRecord{node("worker-1", 78, tlp(25, 25)), node("worker-3", 55, tlp(10, 10)), node("worker-2", 33, tlp(50, 50)),
			{Node: "tiny", Filter: &Verdict{Plugin: "NodeResourcesFit", Code: "Unschedulable", Reasons: []string{"Insufficient cpu"}}}},
		RefusedBy: []ReasonCount{{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", Nodes: 1}},
	}
	r.Nodes[0].Chosen = true
	return r
}

// jsonRoundTrip is what a client sees: details decoded as map[string]any.
func jsonRoundTrip(t *testing.T, r Record) Record {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var out Record
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSummary: the Scheduled event's one-line summary, from a record as the scheduler holds it
// and as a client decodes it.
func TestSummary(t *testing.T) {
	hinted := Record{Chosen: "n1", NodeHint: "n1", HintFrom: "ns/twin", Nodes: []NodeRecord{{Node: "n1", Feasible: true, Chosen: true}}}
	single := Record{Chosen: "n1", ScoringSkipped: true, Refused: 4, Nodes: []NodeRecord{{Node: "n1", Feasible: true, Chosen: true}}}
	tests := []struct {
		name string
		rec  Record
		max  int
		want string
	}{
		{"seed 001", seed001(), 0, "TargetLoadPacking 78 (util 25 %→25 %), SySched 50 (ExS 3), total 128; next best worker-3 105"},
		{"cut to 30 bytes", seed001(), 30, "TargetLoadPacking 78 (util …"},
		{"unschedulable", Record{Outcome: OutcomeUnschedulable}, 0, ""},
		{"batching hint", hinted, 0, "reused the scoring of ns/twin (identical pod, opportunistic batching)"},
		{"only feasible node", single, 0, "the only feasible node, not scored; 4 nodes refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []Record{tc.rec, jsonRoundTrip(t, tc.rec)} {
				if got := Summary(r, tc.max); got != tc.want {
					t.Errorf("got  %q\nwant %q", got, tc.want)
				}
			}
		})
	}
}

// TestInputLines: every plugin's inputs, whatever shape the details travelled in.
func TestInputLines(t *testing.T) {
	for _, r := range []Record{seed001(), jsonRoundTrip(t, seed001())} {
		got := r.Nodes[0].InputLines()
		want := []string{
			"worker-1 TargetLoadPacking: measured 25 % of 8000m; + pod 0m + unreported 0m → 25 % (target 40 %); BerthAgent fresh sample 2s old",
			"worker-1 SySched: ExS 3 = |H∖P| 1 + 1 pods × |H∪P| 12 − Σ|S_q| 10 (|H| 10, |P| 9)",
		}
		if len(got) != len(want) {
			t.Fatalf("got %q, want %q", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("line %d: got %q, want %q", i, got[i], want[i])
			}
		}
		if lines := r.Nodes[3].InputLines(); len(lines) != 0 {
			t.Errorf("a refused node reports inputs: %q", lines)
		}
	}
}

// TestHeadroomLine: TargetLoadPacking's varianceMargin term is written out where it was added,
// and only there, as the scheduler holds it and as a client decodes it.
func TestHeadroomLine(t *testing.T) {
	r := seed001()
	d := r.Nodes[0].Details["TargetLoadPacking"].(LoadDetail)
	d.PredictedPercent, d.HeadroomPercent = 37, 12
	r.Nodes[0].Details["TargetLoadPacking"] = d
	want := "worker-1 TargetLoadPacking: measured 25 % of 8000m; + pod 0m + unreported 0m + headroom 12 % → 37 % (target 40 %); BerthAgent fresh sample 2s old"
	for _, rr := range []Record{r, jsonRoundTrip(t, r)} {
		if got := rr.Nodes[0].InputLines()[0]; got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
		if got := rr.Nodes[1].InputLines()[0]; strings.Contains(got, "headroom") {
			t.Errorf("a node without headroom shows one: %q", got)
		}
	}
}

var update = flag.Bool("update", false, "rewrite cmd/kubectl-berth/testdata/seed001.json from seed001()")

// The CLI's tests read seed001 as the scheduler serves it over the wire; this keeps that file
// equal to the record built here.
func TestSeed001Fixture(t *testing.T) {
	b, err := json.MarshalIndent(seed001(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "cmd", "kubectl-berth", "testdata", "seed001.json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(b)+"\n" {
		t.Errorf("%s differs from seed001(); go test ./decisionapi -run TestSeed001Fixture -update", path)
	}
}

// TestHeldAtEstimateLine: the part of the placed pods' remaining estimate that estimateSeconds
// holds is written out for both load-aware plugins, and only where there is one, as the
// scheduler holds it and as a client decodes it.
func TestHeldAtEstimateLine(t *testing.T) {
	r := seed001()
	d := r.Nodes[0].Details["TargetLoadPacking"].(LoadDetail)
	d.UnreportedMilliCPU, d.HeldAtEstimateMilliCPU, d.PredictedPercent = 1000, 990, 37.5
	r.Nodes[0].Details["TargetLoadPacking"] = d
	r.Nodes[0].Details["LoadVariationRiskBalancing"] = LoadDetail{Freshness: "fresh", Source: "BerthAgent", UnreportedMilliCPU: 1000, HeldAtEstimateMilliCPU: 990}
	want := "worker-1 TargetLoadPacking: measured 25 % of 8000m; + pod 0m + unreported 1000m (990m of it held at estimate by estimateSeconds) → 37.5 % (target 40 %); BerthAgent fresh sample 2s old"
	for _, rr := range []Record{r, jsonRoundTrip(t, r)} {
		lines := rr.Nodes[0].InputLines()
		if len(lines) == 0 || lines[0] != want {
			t.Errorf("got  %q\nwant %q", lines, want)
		}
		if !slices.ContainsFunc(lines, func(l string) bool {
			return strings.Contains(l, "LoadVariationRiskBalancing") && strings.Contains(l, "unreported 1000m/0 B (990m of it held at estimate by estimateSeconds)")
		}) {
			t.Errorf("LoadVariationRiskBalancing's line lacks the held part: %q", lines)
		}
		if got := rr.Nodes[1].InputLines()[0]; strings.Contains(got, "held at estimate") {
			t.Errorf("a node without held pods shows some: %q", got)
		}
	}
}

// TestTermsLines: a load-aware plugin this package does not name explains itself through
// Terms and Formula; its short text and input line follow from them, as the scheduler holds
// the record and as a client decodes it, and a neutral score says so.
func TestTermsLines(t *testing.T) {
	r := seed001()
	n := &r.Nodes[0]
	n.Scores = append(n.Scores, PluginScore{Plugin: "Other", Raw: 50, Normalized: 50, Weight: 1, Weighted: 50})
	n.Details["Other"] = LoadDetail{Freshness: "fresh", Source: "BerthAgent", AgeSeconds: 2, Formula: "100·(1 − max risk)",
		Terms: []Term{{Resource: "cpu", Name: "limit", Value: 0.25}, {Resource: "cpu", Name: "risk", Value: 0.5, Key: true},
			{Resource: "memory", Name: "risk", Value: 0.125, Key: true}}}
	r.Nodes[1].Details["Other"] = LoadDetail{Freshness: "stale", Neutral: true}
	for _, rr := range []Record{r, jsonRoundTrip(t, r)} {
		if got, want := rr.Nodes[0].DetailText("Other"), "cpu risk 0.5; memory risk 0.125"; got != want {
			t.Errorf("short: got %q, want %q", got, want)
		}
		lines := rr.Nodes[0].InputLines()
		want := "worker-1 Other: cpu limit 0.25, risk 0.5; memory risk 0.125 → 100·(1 − max risk); unreported 0m/0 B; BerthAgent fresh sample 2s old"
		if got := lines[len(lines)-1]; got != want {
			t.Errorf("line: got  %q\nwant %q", got, want)
		}
		if got := rr.Nodes[1].InputLines(); got[len(got)-1] != "worker-3 Other: load stale: neutral score" {
			t.Errorf("neutral: %q", got)
		}
		if got := rr.Nodes[1].DetailText("Other"); got != "load stale, neutral" {
			t.Errorf("neutral short: %q", got)
		}
	}
}

// TestScorePlugins: every plugin that scored a node, once, in the order first seen (refused
// nodes carry no scores).
func TestScorePlugins(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  Record
		want []string
	}{
		{name: "no scores", rec: Record{Nodes: []NodeRecord{{Node: "a", Filter: &Verdict{Plugin: "F"}}}}},
		{name: "first seen order, once each", rec: Record{Nodes: []NodeRecord{
			{Node: "a", Scores: []PluginScore{{Plugin: "B"}, {Plugin: "A"}}},
			{Node: "b", Scores: []PluginScore{{Plugin: "A"}, {Plugin: "C"}}},
		}}, want: []string{"B", "A", "C"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rec.ScorePlugins(); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
