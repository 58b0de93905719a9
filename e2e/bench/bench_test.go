package bench

import (
	"bytes"
	"context"
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

func tailLog(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
