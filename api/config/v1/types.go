package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// MetricProviderType names an upstream library-mode metrics source. Berth always reads a load
// watcher service; the field is accepted so that upstream configurations decode unchanged.
type MetricProviderType string

// Provider names accepted by upstream scheduler-plugins.
const (
	KubernetesMetricsServer MetricProviderType = "KubernetesMetricsServer"
	Prometheus              MetricProviderType = "Prometheus"
	SignalFx                MetricProviderType = "SignalFx"
)

// MetricProviderSpec is upstream's metricProvider block.
type MetricProviderSpec struct {
	// +optional
	Type MetricProviderType `json:"type,omitempty"`
	// +optional
	Address string `json:"address,omitempty"`
	// +optional
	Token string `json:"token,omitempty"`
	// +optional
	InsecureSkipVerify *bool `json:"insecureSkipVerify,omitempty"`
}

// ExpiredMetricsAction says what a node whose metrics are missing, stale or expired gets.
// +kubebuilder:validation:Enum=Neutral;Block
type ExpiredMetricsAction string

const (
	// ExpiredMetricsNeutral scores such a node with NeutralScore and never filters it out.
	ExpiredMetricsNeutral ExpiredMetricsAction = "Neutral"
	// ExpiredMetricsBlock makes Filter reject such a node, as long as the load watcher itself
	// is answering with fresh data for other nodes.
	ExpiredMetricsBlock ExpiredMetricsAction = "Block"
)

// LoadAwareArgs are the arguments the load-aware plugins (TargetLoadPacking,
// LoadVariationRiskBalancing, LowRiskOverCommitment) share,
// inlined in each so its fields sit at the top level, like upstream's TrimaranSpec.
type LoadAwareArgs struct {
	// WatcherAddress is the load watcher's base URL, e.g. http://berth-loadwatcher.berth-system:2020.
	// +kubebuilder:validation:MinLength=1
	WatcherAddress string `json:"watcherAddress"`
	// MetricProvider is upstream's library-mode provider: accepted and validated so upstream
	// configurations load, never used (berth-scheduler reads the load watcher).
	// +optional
	MetricProvider *MetricProviderSpec `json:"metricProvider,omitempty"`
	// MetricsExpirySeconds: metrics older than this are treated as missing (default 300).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	MetricsExpirySeconds *int64 `json:"metricsExpirySeconds,omitempty"`
	// ExpiredMetricsAction: Neutral (default) or Block.
	// +optional
	ExpiredMetricsAction ExpiredMetricsAction `json:"expiredMetricsAction,omitempty"`
	// NeutralScore is the score of a node whose load is unknown (0..100, default 50).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	NeutralScore *int64 `json:"neutralScore,omitempty"`
	// RefreshIntervalSeconds is how often the snapshot is fetched from the watcher (default 30).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	RefreshIntervalSeconds *int64 `json:"refreshIntervalSeconds,omitempty"`
	// WatcherTimeoutSeconds bounds one fetch: connect, headers and body (default 10).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600
	// +optional
	WatcherTimeoutSeconds *int64 `json:"watcherTimeoutSeconds,omitempty"`
	// AssumedPodExpirySeconds bounds how long a placed pod is added to its node's load while
	// the agent has not reported it (default 300).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	AssumedPodExpirySeconds *int64 `json:"assumedPodExpirySeconds,omitempty"`
	// EstimateSeconds (Berth's; upstream has no such field) keeps a placed pod counted at no
	// less than its spec estimate for this long after placement, even once the agent measures
	// it: a workload that starts slowly (a JVM warming up, a cache filling) is measured low at
	// first, and packing on that measure overloads its node when it warms up. 0 (default): a
	// measured pod counts what it uses.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	EstimateSeconds *int64 `json:"estimateSeconds,omitempty"`
	// PodEstimateSecondsLimit (Berth's) lets a pod choose its own estimateSeconds with the
	// annotation berth.dev/estimate-seconds, up to this many seconds. 0 (default): the
	// annotation is ignored. The limit is the operator's, since whoever creates a pod sets its
	// annotations.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	PodEstimateSecondsLimit *int64 `json:"podEstimateSecondsLimit,omitempty"`
	// UsageThresholds turns on the usage Filter: cpu / memory → maximum percent. Empty
	// (default): the usage filter is off.
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'cpu' || k == 'memory')",message="keys must be cpu or memory"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 1 && self[k] <= 100)",message="values must be percentages between 1 and 100"
	// +optional
	UsageThresholds map[corev1.ResourceName]int64 `json:"usageThresholds,omitempty"`
	// WorkloadProfiles: a new replica counts at what its measured siblings use (Berth's; see
	// WorkloadProfileArgs). On by default.
	// +optional
	WorkloadProfiles *WorkloadProfileArgs `json:"workloadProfiles,omitempty"`
}

// EstimateSecondsAnnotation is the pod annotation choosing that pod's estimateSeconds (a
// whole number of seconds), honoured up to podEstimateSecondsLimit.
const EstimateSecondsAnnotation = "berth.dev/estimate-seconds"
