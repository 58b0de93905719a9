package schedconfig

import (
	"strings"
	"testing"
)

// DecisionRecord's args are checked like the other Berth plugins' before anything runs them:
// the operator refuses a bad configuration naming the field, and accepts a good one.
func TestValidateDecisionRecordArgs(t *testing.T) {
	const base = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: berth-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: DecisionRecord
  pluginConfig:
  - name: DecisionRecord
    args: `
	tests := []struct {
		args, wantErr string
	}{
		{args: "{records: 500, topNodes: 5, summary: Event}"},
		{args: "{}"},
		{args: "{records: 0}", wantErr: "profiles[0].pluginConfig[0].args: records: Invalid value: 0"},
		{args: "{summary: Annotation}", wantErr: `summary: Unsupported value: "Annotation"`},
		{args: "{recordz: 5}", wantErr: "recordz"},
	}
	for _, tc := range tests {
		_, err := Validate([]byte(base + tc.args + "\n"))
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}
