package bench

import (
	"bytes"
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// The harness itself at a small size: every profile binds every pod in every round, and the
// table names each profile with a ratio. Throughput is printed, never asserted.
func TestHarnessMeasuresEveryProfile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o := Options{Nodes: 10, Pods: 60, Rounds: 2, Profiles: []Profile{StockProfile(), BerthDefaultProfile(), NoDefaultSpreadProfile()}, Logf: t.Logf}
	dir := t.TempDir()
	if d := os.Getenv("BERTH_BENCH_KEEP"); d != "" {
		dir = d
	}
	o.Dir = dir
	res, err := Execute(ctx, o)
	if err != nil {
		for _, f := range []string{"bench-kube-scheduler.log", "kube-apiserver.log"} {
			t.Logf("%s:\n%s", f, tailLog(dir+"/logs/"+f))
		}
		t.Fatal(err)
	}
	if len(res.Runs) != 6 {
		t.Fatalf("want 6 runs (3 profiles × 2 rounds), got %d", len(res.Runs))
	}
	for _, r := range res.Runs {
		if r.Pods != 60 || r.Duration <= 0 || r.PodsPerS <= 0 {
			t.Errorf("run %+v did not measure all pods", r)
		}
		// Identical pods queued before the scheduler starts are what opportunistic batching
		// is for, but PodTopologySpread's default constraints make every pod unsignable: the
		// column, read from the scheduler's /metrics, must say so, and show hints used once
		// they are off.
		if r.Profile == NoDefaultSpreadProfile().Name {
			if r.Batched <= 0 || r.Batched >= r.Pods {
				t.Errorf("%s round %d: %d batched cycles of %d pods, want some", r.Profile, r.Round, r.Batched, r.Pods)
			}
		} else if r.Batched != 0 {
			t.Errorf("%s round %d: %d batched cycles with default spread constraints, want 0", r.Profile, r.Round, r.Batched)
		}
	}
	var out bytes.Buffer
	res.Print(&out)
	t.Log("\n" + out.String())
	for _, name := range []string{"kube-scheduler (stock)", "berth-scheduler (default plugins)", "ratio to"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("table lacks %q", name)
		}
	}
}

func TestSummariesMedianAndOrder(t *testing.T) {
	r := &Result{Options: Options{Profiles: []Profile{{Name: "a"}, {Name: "b"}}}, Runs: []Run{
		{Profile: "b", PodsPerS: 10}, {Profile: "a", PodsPerS: 3}, {Profile: "a", PodsPerS: 1},
		{Profile: "a", PodsPerS: 2}, {Profile: "b", PodsPerS: 20},
	}}
	got := r.Summaries()
	want := []Summary{{"a", 2, 1, 3, 0}, {"b", 15, 10, 20, 0}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("summary %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestPairedCPURatioPairsRounds(t *testing.T) {
	r := &Result{Options: Options{Profiles: []Profile{{Name: "full"}, {Name: "floor", Binary: FloorBinary}}}, Runs: []Run{
		{Profile: "full", Round: 1, Pods: 100, CPU: cpu100(3)}, {Profile: "floor", Round: 1, Pods: 100, CPU: cpu100(2)},
		{Profile: "full", Round: 2, Pods: 100, CPU: cpu100(6)}, {Profile: "floor", Round: 2, Pods: 100, CPU: cpu100(6)},
		{Profile: "full", Round: 3, Pods: 100, CPU: cpu100(2.2)}, {Profile: "floor", Round: 3, Pods: 100, CPU: cpu100(2)},
		// A round the floor did not finish pairs with nothing.
		{Profile: "full", Round: 4, Pods: 100, CPU: cpu100(9)},
	}}
	tests := []struct {
		a, b   string
		want   float64
		wantOK bool
	}{
		// Per round 1.5, 1.0, 1.1: the median of the ratios, not the ratio of the medians (3/2).
		{"full", "floor", 1.1, true},
		{"floor", "floor", 1, true},
		{"full", "", 0, false},
		{"full", "absent", 0, false},
	}
	for _, tt := range tests {
		got, ok := r.PairedCPURatio(tt.a, tt.b)
		if ok != tt.wantOK || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("PairedCPURatio(%q, %q) = %v, %v; want %v, %v", tt.a, tt.b, got, ok, tt.want, tt.wantOK)
		}
	}
	if f := r.floorProfile(); f != "floor" {
		t.Errorf("floorProfile() = %q, want floor", f)
	}
	var out bytes.Buffer
	r.Print(&out)
	if !strings.Contains(out.String(), "CPU ÷ floor (paired)") || !strings.Contains(out.String(), "1.10") {
		t.Errorf("table lacks the paired floor ratio:\n%s", out.String())
	}
}

func TestWithTwinsFollowsEachBerthProfile(t *testing.T) {
	in := []Profile{StockProfile(), BerthDefaultProfile(), FloorProfile()}
	if got := WithTwins(in, "", ""); len(got) != len(in) {
		t.Fatalf("no binary: got %d profiles, want %d", len(got), len(in))
	}
	if got := WithTwins(in, "berth-scheduler-base", "no-op,stock"); len(got) != len(in) {
		t.Errorf("twins only of profiles not run by berth-scheduler: got %d profiles, want %d", len(got), len(in))
	}
	got := WithTwins(in, "berth-scheduler-base", "")
	want := []struct{ name, binary string }{
		{StockProfile().Name, "kube-scheduler"},
		{BerthDefaultProfile().Name, "berth-scheduler"},
		{BerthDefaultProfile().Name + " [berth-scheduler-base]", "berth-scheduler-base"},
		{FloorProfile().Name, FloorBinary},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d profiles, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Binary != w.binary {
			t.Errorf("profile %d = %q on %q, want %q on %q", i, got[i].Name, got[i].Binary, w.name, w.binary)
		}
	}
	// The twin shares what its original's Setup serves (the synthetic watcher's port).
	full := WithTwins([]Profile{FullBerthProfile()}, "berth-scheduler-base", "")
	if len(full) != 2 || full[0].Setup == nil || full[1].Setup != nil || full[1].Profiles != full[0].Profiles {
		t.Errorf("twin of the full profile: want the same configuration without a Setup of its own")
	}
}

// cpu100 is the CPU of a 100-pod run that CPUPerPod reports as msPerPod.
func cpu100(msPerPod float64) time.Duration {
	return time.Duration(msPerPod * 99 * float64(time.Millisecond))
}

func tailLog(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
