package framework

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
