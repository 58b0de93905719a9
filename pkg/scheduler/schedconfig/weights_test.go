package schedconfig

import (
	"fmt"
	"strings"
	"testing"
)

func weightConfig(point string, weight int) string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: berth-scheduler
  plugins:
    %s:
      enabled:
      - name: NodeResourcesBalancedAllocation
        weight: %d
`, point, weight)
}

// Upstream validation accepts a negative plugin weight; the scheduler (at start) and the
// operator (before rolling out) refuse it through Validate, naming the field.
func TestNegativeWeightsRefused(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		wantErr string // "" = valid
	}{
		{"score weight 2", weightConfig("score", 2), ""},
		{"score weight 0 (default)", weightConfig("score", 0), ""},
		{"score weight -1", weightConfig("score", -1), "profiles[0].plugins.score.enabled[0].weight: Invalid value: -1"},
		{"multiPoint weight -5", weightConfig("multiPoint", -5), "profiles[0].plugins.multiPoint.enabled[0].weight: Invalid value: -5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate([]byte(tc.config))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "NodeResourcesBalancedAllocation")):
				t.Fatalf("err %v, want one containing %q and the plugin's name", err, tc.wantErr)
			}
		})
	}
	// The operator's path: a raw configuration in a ConfigMap.
	_, err := Render(cr(nil, ref), []byte(weightConfig("score", -3)))
	if err == nil || !strings.Contains(err.Error(), "spec.configMapRef: ConfigMap berth-system/raw key config.yaml") ||
		!strings.Contains(err.Error(), "profiles[0].plugins.score.enabled[0].weight") {
		t.Fatalf("Render of a raw config with weight -3: %v", err)
	}
}
