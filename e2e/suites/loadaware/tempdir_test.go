package loadaware

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
)

// TestDefaultConfigNotLeftBehind: berth-scheduler started without --config writes its default
// configuration to a temporary directory; once it runs, the directory must be gone (it used to
// stay, one per start, since a scheduler ends by signal, not by returning). The suite's
// TestMain checks the whole temporary directory after teardown too.
func TestDefaultConfigNotLeftBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "berth-scheduler-*"))
	sched, err := shared.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-defaults"})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.StopComponent(sched.Process)
	// Ready means Setup (which reads the configuration) is done.
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "berth-scheduler-*"))
	if len(after) != len(before) {
		t.Fatalf("a running berth-scheduler left its default configuration behind: %v (before: %v)", after, before)
	}
}
