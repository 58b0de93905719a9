package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestIsolationGoalLine(t *testing.T) {
	tests := []struct {
		name          string
		pods, cpu     float64
		podsOK, cpuOK bool
		want          string
	}{
		{"both at the goal", 0.95, 1.02, true, true, "(0.95×) and in CPU per pod (1.02×): met"},
		{"pods/s short", 0.94, 1.2, true, true, ": NOT met"},
		{"CPU short", 1.1, 0.8, true, true, ": NOT met"},
		{"a side missing", 1.1, 0, true, false, "(n/a): not measured"},
	}
	for _, tt := range tests {
		got := isolationGoalLine(tt.pods, tt.podsOK, tt.cpu, tt.cpuOK)
		if !strings.Contains(got, tt.want) || !strings.HasPrefix(got, "goal: berth mode ≥ 0.95× no class") {
			t.Errorf("%s: %q lacks %q", tt.name, got, tt.want)
		}
	}
}

// The goal compares CPU per pod round by round: berth mode's against the no-class run of the
// same round, as a speed (above 1: cheaper).
func TestPrintIsolationRatiosPairsCPU(t *testing.T) {
	profiles, err := IsolationProfiles(5)
	if err != nil {
		t.Fatal(err)
	}
	r := &Result{Options: Options{Profiles: profiles}, Runs: []Run{
		{Profile: IsolationBerthMode, Round: 1, Pods: 100, PodsPerS: 300, CPU: cpu100(2)},
		{Profile: IsolationNoClass, Round: 1, Pods: 100, PodsPerS: 310, CPU: cpu100(2)},
		{Profile: IsolationBerthMode, Round: 2, Pods: 100, PodsPerS: 200, CPU: cpu100(4)},
		{Profile: IsolationNoClass, Round: 2, Pods: 100, PodsPerS: 200, CPU: cpu100(2)},
		{Profile: IsolationBerthMode, Round: 3, Pods: 100, PodsPerS: 250, CPU: cpu100(2.1)},
		{Profile: IsolationNoClass, Round: 3, Pods: 100, PodsPerS: 250, CPU: cpu100(2)},
	}}
	var out bytes.Buffer
	r.PrintIsolationRatios(&out)
	// pods/s medians 250 vs 250; CPU per round 1, 0.5, 0.952…: median 0.95.
	if !strings.Contains(out.String(), "no class in pods/s (1.00×) and in CPU per pod (0.95×): met") {
		t.Errorf("goal line wrong:\n%s", out.String())
	}
}

func TestRecordingOnlyProfileRecordsAndIsolatesNothing(t *testing.T) {
	p, err := recordingOnlyProfile()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p, "DecisionRecord") || strings.Contains(p, "InstanceIsolation") || !strings.Contains(p, "schedulerName: "+SchedulerName) {
		t.Errorf("profile:\n%s", p)
	}
}
