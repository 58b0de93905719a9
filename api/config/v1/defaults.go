package v1

import (
	"strings"
)

// Defaults. Unlike upstream, defaulting fills only what is unset: an explicit out-of-range value
// stays, so validation names it instead of silently replacing it. Each plugin's own defaults sit
// with its args (targetloadpacking.go, ...); these are the load-aware plugins' shared ones.
const (
	DefaultMetricsExpirySeconds    int64 = 300
	DefaultRefreshIntervalSeconds  int64 = 30
	DefaultWatcherTimeoutSeconds   int64 = 10
	DefaultAssumedPodExpirySeconds int64 = 300
	DefaultNeutralScore            int64 = 50
)

func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

// SetDefaults_LoadAwareArgs fills unset fields; the watcher address loses surrounding space and
// trailing slashes (/watcher is appended to it).
func SetDefaults_LoadAwareArgs(obj *LoadAwareArgs) {
	obj.WatcherAddress = strings.TrimRight(strings.TrimSpace(obj.WatcherAddress), "/")
	setDefault(&obj.MetricsExpirySeconds, DefaultMetricsExpirySeconds)
	setDefault(&obj.RefreshIntervalSeconds, DefaultRefreshIntervalSeconds)
	setDefault(&obj.WatcherTimeoutSeconds, DefaultWatcherTimeoutSeconds)
	setDefault(&obj.AssumedPodExpirySeconds, DefaultAssumedPodExpirySeconds)
	setDefault(&obj.EstimateSeconds, 0)
	setDefault(&obj.PodEstimateSecondsLimit, 0)
	setDefault(&obj.NeutralScore, DefaultNeutralScore)
	if obj.ExpiredMetricsAction == "" {
		obj.ExpiredMetricsAction = ExpiredMetricsNeutral
	}
	setDefault(&obj.WorkloadProfiles, WorkloadProfileArgs{})
	SetDefaults_WorkloadProfileArgs(obj.WorkloadProfiles)
}
