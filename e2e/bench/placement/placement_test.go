package placement

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/framework"
)

// TestMain: the benchmark's cluster, fixture /proc trees and scheduler configurations must all
// be gone after a run, including a run whose watcher died.
func TestMain(m *testing.M) { framework.RunIsolated(m) }

// TestBadInputIsReported runs the real benchmark, small: three KWOK nodes, pods scaled up so
// some are bigger than any node, and the load watcher killed at the second of three waves.
// The run must finish every wave (scheduling goes on without load data), and the table must
// say what went wrong: unplaced and oversized pods, failed watcher polls, and a note.
func TestBadInputIsReported(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runs, err := Runs([]string{"tlp40"})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Scenario: ScenarioOptions{Seed: 3, Nodes: 3, Pods: 12, Waves: 3, PodScale: 25},
		Runs:     runs, WavePause: 3 * time.Second, Settle: 3 * time.Second, KillWatcherAtWave: 2,
		Logf: t.Logf,
	}
	sc, err := Generate(o.Scenario)
	if err != nil {
		t.Fatal(err)
	}
	oversized := len(sc.Oversized())
	if oversized == 0 {
		t.Fatalf("scenario has no pod bigger than every node; the test needs one: %+v", sc.Nodes)
	}
	res, err := Execute(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(res.Runs))
	}
	r := res.Runs[0]
	if r.WavesRun != 3 {
		t.Errorf("%d of 3 waves ran: a dead watcher must not shorten the run", r.WavesRun)
	}
	if r.FailedPolls == 0 {
		t.Errorf("no failed watcher poll recorded after killing it (%d polls)", r.Polls)
	}
	if r.Oversized != oversized || r.Unplaced < oversized {
		t.Errorf("unplaced %d, oversized %d; want at least the %d oversized pods unplaced", r.Unplaced, r.Oversized, oversized)
	}
	if r.Placed == 0 {
		t.Errorf("no pod placed: berth-scheduler must keep scheduling with neutral scores")
	}
	var b bytes.Buffer
	res.Print(&b)
	out := b.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"load watcher stopped at wave 2",
		"watcher unreachable in",
		"oversized)",
		"no scheduler can place them",
		"3/3", // waves column
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}
