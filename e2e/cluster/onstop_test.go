package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/agent/load/fixture"
)

// A writer registered with OnStop is stopped, and has returned, before Stop removes the
// cluster's directory, so nothing recreates files under it (the demo used to leave
// demo-loadaware/<agent>/proc behind). Hooks run in reverse order of registration.
func TestOnStopRunsBeforeTheDirectoryGoes(t *testing.T) {
	dir, err := os.MkdirTemp("", "berth-cluster-onstop-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, ownsDir: true, cfg: Config{Logf: t.Logf}}
	var order []int
	for i := range 3 {
		fx, err := fixture.New(filepath.Join(dir, "agent", "proc"), 10, 10)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		// A writer faster than any teardown: without the hook it races the removal.
		go func() { defer close(done); _ = fx.Run(ctx, time.Microsecond) }()
		c.OnStop(func() {
			cancel()
			<-done
			order = append(order, i)
		})
	}
	time.Sleep(20 * time.Millisecond)
	c.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		os.RemoveAll(dir)
		t.Fatalf("cluster directory still there after Stop: %v", err)
	}
	time.Sleep(20 * time.Millisecond) // and nothing recreates it afterwards
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		os.RemoveAll(dir)
		t.Fatal("cluster directory recreated after Stop")
	}
	if len(order) != 3 || order[0] != 2 || order[2] != 0 {
		t.Fatalf("hooks ran in order %v, want [2 1 0]", order)
	}
}
