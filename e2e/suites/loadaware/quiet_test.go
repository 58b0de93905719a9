package loadaware

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/stack"
)

// TestQuietWhenWatcherDown: berth-scheduler with TargetLoadPacking and
// LoadVariationRiskBalancing (two plugin instances) refreshing every second from a load watcher
// address where nothing listens. Over a fixed 12 s the log must say so once per instance (it
// used to log an error per instance and refresh: ~24 lines), while the metrics count every
// failed refresh and the snapshot's age; when a real watcher comes up on that address, each
// instance logs the recovery once.
func TestQuietWhenWatcherDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := shared
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: berth-quiet
  plugins:
    multiPoint:
      enabled:
      - name: TargetLoadPacking
      - name: LoadVariationRiskBalancing
  pluginConfig:
  - name: TargetLoadPacking
    args: {watcherAddress: "http://%[1]s", refreshIntervalSeconds: 1, watcherTimeoutSeconds: 1}
  - name: LoadVariationRiskBalancing
    args: {watcherAddress: "http://%[1]s", refreshIntervalSeconds: 1, watcherTimeoutSeconds: 1}
`, addr)
	sched, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-quiet", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopComponent(sched.Process) })
	metrics, err := stack.SchedulerMetrics(ctx, c, sched.Port)
	if err != nil {
		t.Fatal(err)
	}
	const window = 12 * time.Second
	time.Sleep(window)
	log := readLog(t, sched.LogPath)
	plugins := []string{"TargetLoadPacking", "LoadVariationRiskBalancing"}
	for _, pl := range plugins {
		if n := countLines(log, "Load watcher unreachable", pl); n != 1 {
			t.Errorf("%s: %d 'unreachable' lines in %s, want 1", pl, n, window)
		}
	}
	if n := countLines(log, "still unreachable", ""); n != 0 {
		t.Errorf("%d 'still unreachable' lines within %s, want 0 (the reminder comes every 5 min)", n, window)
	}
	if n := countLines(log, "watcher", "E"); n != 2 {
		t.Errorf("%d error lines about the watcher in %s, want 2 (one per plugin instance):\n%s", n, window, sched.Tail(40))
	}
	page := metrics()
	for _, pl := range plugins {
		errs := sample(page, `berth_loadaware_watcher_refresh_errors_total{plugin="`+pl+`"}`)
		age := sample(page, `berth_loadaware_snapshot_age_seconds{plugin="`+pl+`"}`)
		// One refresh per second, each failing at once (connection refused).
		if errs < float64(window/time.Second)-3 || age < float64(window/time.Second)-3 {
			t.Errorf("%s: refresh errors %v, snapshot age %v s after %s down", pl, errs, age, window)
		}
	}

	// A real load watcher comes up on the address: each instance logs the recovery once.
	kc, err := stack.WatcherKubeconfig(ctx, c, "quiet-loadwatcher", stack.AgentNamespace)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.StartComponent(ctx, cluster.ProcessSpec{Name: "quiet-loadwatcher", Binary: filepath.Join(c.BinDir, "berth-loadwatcher"),
		Args: []string{"--listen=" + addr, "--kubeconfig=" + kc, "--source=agent", "--agent-service-account=" + stack.AgentNamespace + "/" + stack.AgentServiceAccount}},
		cluster.HTTPCheck("http://"+addr+"/readyz"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopComponent(w) })
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		log := readLog(t, sched.LogPath)
		for _, pl := range plugins {
			if countLines(log, "Load watcher reachable again", pl) != 1 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("recovery not logged once per plugin instance: %v\n%s", err, sched.Tail(20))
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// countLines counts log lines containing msg and also, if set, and (a plugin name, or "E" for
// klog error lines, which start with E and the date).
func countLines(log, msg, and string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, msg) {
			continue
		}
		switch {
		case and == "E" && !strings.HasPrefix(l, "E"):
			continue
		case and != "" && and != "E" && !strings.Contains(l, `plugin="`+and+`"`):
			continue
		}
		n++
	}
	return n
}

// sample is the value of the first metric line starting with prefix, or -1.
func sample(page, prefix string) float64 {
	l, ok := metricLine(page, prefix)
	if !ok {
		return -1
	}
	return value(l)
}
