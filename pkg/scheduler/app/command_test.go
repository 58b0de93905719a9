package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// berth-scheduler refuses at start what the operator refuses before a rollout (shared
// schedconfig.Validate), naming the field, before it connects anywhere.
func TestCommandRefusesInvalidConfig(t *testing.T) {
	tests := []struct {
		name, config string
		want         []string
	}{
		{"negative weight", `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: x
  plugins:
    score:
      enabled:
      - name: NodeResourcesFit
        weight: -1
`, []string{"profiles[0].plugins.score.enabled[0].weight", "must not be negative"}},
		{"Berth plugin args", `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: x
  pluginConfig:
  - name: TargetLoadPacking
    args:
      watcherAddress: ftp://nowhere
`, []string{"profiles[0].pluginConfig[0].args", "watcherAddress"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := NewCommand()
			cmd.SetArgs([]string{"--config=" + path})
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.Execute()
			if err == nil {
				t.Fatal("started with an invalid configuration")
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
