package loadwatcher

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/loadapi"
)

var testNow = time.Unix(1_700_000_000, 0)

func validReport() Report {
	return Report{Node: "node-1", Time: testNow.Unix() - 3, Latest: Latest{CPU: 30, Memory: 40},
		Windows: []WindowReport{
			{Window: "5m", Samples: 300, CPU: ResourceStats{Avg: 25, Std: 5, P95: 35}, Memory: ResourceStats{Avg: 40, Std: 1, P95: 41}},
			{Window: "15m", Samples: 900, CPU: ResourceStats{Avg: 20, Std: 4, P95: 30}, Memory: ResourceStats{Avg: 40, Std: 1, P95: 41}},
		},
		PodUIDs: []string{"0b7c1c1e-8f5e-4c5a-9c57-0d9c3b1f6a11"},
		Pods: []loadapi.PodUsage{{UID: "0b7c1c1e-8f5e-4c5a-9c57-0d9c3b1f6a11", Latest: Latest{CPU: 3, Memory: 1},
			Windows: []loadapi.PodWindow{{Window: "5m", CPU: 2, Memory: 1}, {Window: "15m", CPU: 1, Memory: 0.5}}, CPUMillicores: 120, MemoryBytes: 1 << 28}}}
}

func TestReportValidate(t *testing.T) {
	uids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("uid-%d", i)
		}
		return out
	}
	tests := []struct {
		name   string
		mut    func(*Report)
		reason string // "" = valid
	}{
		{"valid", func(*Report) {}, ""},
		{"exactly the pod limit", func(r *Report) { r.PodUIDs = append(uids(DefaultMaxPodUIDs-1), r.PodUIDs[0]) }, ""},
		{"no pods", func(r *Report) { r.PodUIDs, r.Pods = nil, nil }, ""},
		{"values at bounds", func(r *Report) { r.Latest = Latest{CPU: 0, Memory: 100} }, ""},
		{"empty node", func(r *Report) { r.Node = "" }, ReasonBadNode},
		{"node with slash", func(r *Report) { r.Node = "a/b" }, ReasonBadNode},
		{"node too long", func(r *Report) { r.Node = strings.Repeat("a", 254) }, ReasonBadNode},
		{"zero time", func(r *Report) { r.Time = 0 }, ReasonBadTime},
		{"from the future", func(r *Report) { r.Time = testNow.Add(time.Hour).Unix() }, ReasonBadTime},
		{"too old", func(r *Report) { r.Time = testNow.Add(-time.Hour).Unix() }, ReasonBadTime},
		{"negative latest", func(r *Report) { r.Latest.CPU = -1 }, ReasonBadValue},
		{"latest over 100", func(r *Report) { r.Latest.Memory = 100.01 }, ReasonBadValue},
		{"NaN avg", func(r *Report) { r.Windows[0].CPU.Avg = math.NaN() }, ReasonBadValue},
		{"Inf std", func(r *Report) { r.Windows[1].Memory.Std = math.Inf(1) }, ReasonBadValue},
		{"p95 over 100", func(r *Report) { r.Windows[1].CPU.P95 = 250 }, ReasonBadValue},
		{"negative std", func(r *Report) { r.Windows[0].Memory.Std = -0.5 }, ReasonBadValue},
		{"no windows", func(r *Report) { r.Windows = nil }, ReasonBadWindow},
		{"unknown window", func(r *Report) { r.Windows[0].Window = "1h" }, ReasonBadWindow},
		{"duplicate window", func(r *Report) { r.Windows[1].Window = "5m" }, ReasonBadWindow},
		{"zero samples", func(r *Report) { r.Windows[0].Samples = 0 }, ReasonBadWindow},
		{"too many pods", func(r *Report) { r.PodUIDs = uids(DefaultMaxPodUIDs + 1) }, ReasonTooManyPods},
		{"empty pod uid", func(r *Report) { r.PodUIDs = []string{""} }, ReasonBadPodUID},
		{"huge pod uid", func(r *Report) { r.PodUIDs = []string{strings.Repeat("x", 65)} }, ReasonBadPodUID},
		{"control char in uid", func(r *Report) { r.PodUIDs = []string{"abc\n"} }, ReasonBadPodUID},
		{"no per-pod usage", func(r *Report) { r.Pods = nil }, ""},
		{"pod usage of a pod not listed", func(r *Report) { r.Pods[0].UID = "other" }, ReasonBadPodUsage},
		{"pod usage twice", func(r *Report) { r.Pods = append(r.Pods, r.Pods[0]) }, ReasonBadPodUsage},
		{"pod usage over the bound", func(r *Report) {
			r.PodUIDs = uids(loadapi.MaxPods + 1)
			r.Pods = make([]loadapi.PodUsage, loadapi.MaxPods+1)
			for i := range r.Pods {
				r.Pods[i].UID = r.PodUIDs[i]
			}
		}, ReasonTooManyPods},
		{"pod latest over 100", func(r *Report) { r.Pods[0].Latest.CPU = 1e300 }, ReasonBadValue},
		{"pod window NaN", func(r *Report) { r.Pods[0].Windows[1].Memory = math.NaN() }, ReasonBadValue},
		{"pod window negative", func(r *Report) { r.Pods[0].Windows[0].CPU = -3 }, ReasonBadValue},
		{"pod window the node lacks", func(r *Report) { r.Pods[0].Windows[0].Window = "10m" }, ReasonBadPodUsage},
		{"pod window repeated", func(r *Report) { r.Pods[0].Windows[1].Window = "5m" }, ReasonBadPodUsage},
		{"pod negative bytes", func(r *Report) { r.Pods[0].MemoryBytes = -1 }, ReasonBadPodUsage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := validReport()
			tc.mut(&r)
			err := ValidateReport(&r, testNow, Limits{})
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Reason != tc.reason {
				t.Fatalf("err = %v, want reason %s", err, tc.reason)
			}
		})
	}
	r := validReport()
	r.PodUIDs = uids(11)
	if err := ValidateReport(&r, testNow, Limits{MaxPodUIDs: 10}); err == nil {
		t.Fatal("a custom pod limit was ignored")
	}
}
