package loadaware

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSchedulerRefusesNegativeWeight starts the real berth-scheduler binary with a raw
// configuration whose score plugin has a negative weight (upstream validation accepts it): it
// must exit non-zero at start, naming the field, before touching the cluster.
func TestSchedulerRefusesNegativeWeight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: `+shared.Kubeconfig+`
leaderElection:
  leaderElect: false
profiles:
- schedulerName: berth-negative-weight
  plugins:
    score:
      enabled:
      - name: TargetLoadPacking
        weight: -2
  pluginConfig:
  - name: TargetLoadPacking
    args:
      watcherAddress: http://127.0.0.1:1
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(shared.BinDir, "berth-scheduler"), "--config="+cfg, "--secure-port=0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if ctx.Err() != nil || err == nil || !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("berth-scheduler with weight -2: err %v (ctx %v), want a non-zero exit at start\n%s", err, ctx.Err(), out)
	}
	for _, want := range []string{"profiles[0].plugins.score.enabled[0].weight", "-2", "must not be negative", "TargetLoadPacking"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
