package framework

import (
	"fmt"

	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

// SchedulerConfig wraps profile entries (YAML list items under `profiles:`) in a
// KubeSchedulerConfiguration. Leader election is off: the suites, demo and benchmarks run
// extra schedulers next to berth-scheduler, and none of them must wait for or take its Lease.
func SchedulerConfig(profiles ...string) string {
	out := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" +
		"leaderElection:\n  leaderElect: false\nprofiles:\n"
	for _, p := range profiles {
		out += p
	}
	return out
}

// SySchedProfile is a profile entry that enables SySched at every extension point it
// implements (multiPoint: PreFilter and Filter for profiles not installed on a node, PreScore,
// Score, Reserve) with the default weight, counting unconfined pods as default/<fullProfile>;
// the same setup as examples/sysched/scheduler-config.yaml and as the operator renders.
func SySchedProfile(schedulerName, fullProfile string) string {
	return "- schedulerName: " + schedulerName + `
  plugins:
    multiPoint:
      enabled:
      - name: SySched
  pluginConfig:
  - name: SySched
    args:
      defaultProfileNamespace: default
      defaultProfileName: ` + fullProfile + "\n"
}

// SchedulerConfigFromSpec is the KubeSchedulerConfiguration the operator would deploy for the
// SecondaryScheduler written as specYAML (schedconfig.Render, the operator's own renderer and
// validator), with leader election off so it runs beside the cluster's default scheduler.
func SchedulerConfigFromSpec(specYAML string) (string, error) {
	var ss berthv1alpha1.SecondaryScheduler
	if err := yaml.UnmarshalStrict([]byte(specYAML), &ss); err != nil {
		return "", fmt.Errorf("%w\n%s", err, specYAML)
	}
	out, err := schedconfig.Render(&ss, nil)
	if err != nil {
		return "", err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(out.YAML, &doc); err != nil {
		return "", err
	}
	doc["leaderElection"] = map[string]any{"leaderElect": false}
	b, err := yaml.Marshal(doc)
	return string(b), err
}
