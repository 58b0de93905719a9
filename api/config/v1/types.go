package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// LoadAwareArgs are the arguments TargetLoadPacking and LoadVariationRiskBalancing share,
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
}

// EstimateSecondsAnnotation is the pod annotation choosing that pod's estimateSeconds (a
// whole number of seconds), honoured up to podEstimateSecondsLimit.
const EstimateSecondsAnnotation = "berth.dev/estimate-seconds"

// TargetLoadPackingArgs are TargetLoadPacking's arguments: upstream scheduler-plugins' names
// and types (defaultRequestsMultiplier is a string there too) plus LoadAwareArgs.
// +kubebuilder:object:root=true
type TargetLoadPackingArgs struct {
	metav1.TypeMeta `json:",inline"`
	LoadAwareArgs   `json:",inline"`

	// TargetUtilization is the CPU percent nodes are packed up to (default 40).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	TargetUtilization *int64 `json:"targetUtilization,omitempty"`
	// DefaultRequests is the CPU assumed for containers without requests (default 1 CPU).
	// +optional
	DefaultRequests corev1.ResourceList `json:"defaultRequests,omitempty"`
	// DefaultRequestsMultiplier scales requests of containers without limits: a decimal in a
	// string, as upstream (default "1.5").
	// +optional
	DefaultRequestsMultiplier *string `json:"defaultRequestsMultiplier,omitempty"`
	// VarianceMargin (Berth's; upstream has no such field) adds this many standard deviations
	// of the node's CPU over the scored window to its predicted utilisation, so a node whose
	// load swings keeps that much headroom under the target and a steady one packs up to it: a
	// decimal in a string, at most 10 (default "0": upstream's score).
	// +kubebuilder:validation:Pattern=`^([0-9](\.[0-9]+)?|10(\.0+)?)$`
	// +optional
	VarianceMargin *Decimal `json:"varianceMargin,omitempty"`
}

// LoadVariationRiskBalancingArgs are LoadVariationRiskBalancing's arguments: upstream's names
// plus LoadAwareArgs.
// +kubebuilder:object:root=true
type LoadVariationRiskBalancingArgs struct {
	metav1.TypeMeta `json:",inline"`
	LoadAwareArgs   `json:",inline"`

	// SafeVarianceMargin multiplies the (sensitivity-adjusted) standard deviation (default 1).
	// +optional
	SafeVarianceMargin *Decimal `json:"safeVarianceMargin,omitempty"`
	// SafeVarianceSensitivity is the root taken of the standard deviation (1/sensitivity
	// power); 0 ignores the deviation entirely (default 1).
	// +optional
	SafeVarianceSensitivity *Decimal `json:"safeVarianceSensitivity,omitempty"`
}

// DaemonSetPods values.
const (
	DaemonSetPodsExclude = "Exclude"
	DaemonSetPodsCount   = "Count"
)

// RuntimeDefault and UnsetProfile values.
const (
	RuntimeDefaultContainerd = "Containerd"
	RuntimeDefaultFull       = "Full"
	UnsetUnconfined          = "Unconfined"
	UnsetRuntimeDefault      = "RuntimeDefault"
)

// SySchedArgs are SySched's arguments. SyschedCRDNamespace and SyschedFullCRDName are the names
// upstream's early README used; they are accepted so existing configurations keep working.
// +kubebuilder:object:root=true
type SySchedArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultProfileNamespace is the namespace of the "unconfined" SeccompProfile (older,
	// namespaced SPO; default "default"). For the cluster-scoped SPO shape only the name is used.
	// +optional
	DefaultProfileNamespace string `json:"defaultProfileNamespace,omitempty"`
	// DefaultProfileName names the SeccompProfile whose syscalls stand for unconfined pods
	// (default all-syscalls).
	// +optional
	DefaultProfileName string `json:"defaultProfileName,omitempty"`
	// SyschedCRDNamespace is a deprecated alias of defaultProfileNamespace.
	// +optional
	SyschedCRDNamespace string `json:"syschedCRDNamespace,omitempty"`
	// SyschedFullCRDName is a deprecated alias of defaultProfileName.
	// +optional
	SyschedFullCRDName string `json:"syschedFullCRDName,omitempty"`
	// DaemonSetPods: Exclude (default) leaves pods a DaemonSet owns out of every node's
	// syscall union and pod count (they run on every node, so they say nothing about which
	// node suits a pod, and would flatten every score); Count counts them like any pod.
	// +kubebuilder:validation:Enum=Exclude;Count
	// +optional
	DaemonSetPods string `json:"daemonSetPods,omitempty"`
	// ExcludedPodSelector leaves other pods that run on every node out likewise, by label.
	// +optional
	ExcludedPodSelector *metav1.LabelSelector `json:"excludedPodSelector,omitempty"`
	// RuntimeDefault is what a RuntimeDefault container counts as: Containerd (default;
	// containerd's default profile, shipped with Berth) or Full (every syscall).
	// +kubebuilder:validation:Enum=Containerd;Full
	// +optional
	RuntimeDefault string `json:"runtimeDefault,omitempty"`
	// RuntimeDefaultProfileName names a SeccompProfile that stands for RuntimeDefault instead
	// (another runtime); it overrides RuntimeDefault.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	RuntimeDefaultProfileName string `json:"runtimeDefaultProfileName,omitempty"`
	// UnsetProfile is what a container without a profile counts as: Unconfined (default) or
	// RuntimeDefault (kubelets run with --seccomp-default).
	// +kubebuilder:validation:Enum=Unconfined;RuntimeDefault
	// +optional
	UnsetProfile string `json:"unsetProfile,omitempty"`
	// FilterNotInstalled (default true) refuses nodes where the Security Profiles Operator
	// reports a profile the pod needs as not Installed; without its node-status objects it
	// does nothing.
	// +optional
	FilterNotInstalled *bool `json:"filterNotInstalled,omitempty"`
}

// NodeImageLocalityArgs are NodeImageLocality's arguments. The score weight lives in the
// profile, not here.
// +kubebuilder:object:root=true
type NodeImageLocalityArgs struct {
	metav1.TypeMeta `json:",inline"`

	// AssumePulledFor is how long the images of a pod just placed on a node count as present
	// there (the pull is under way); "0s" turns it off. Default 5m, at most 1h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	AssumePulledFor *metav1.Duration `json:"assumePulledFor,omitempty"`
	// UseNodeStatus reads node.status.images for nodes without a NodeImages object (default true).
	// +optional
	UseNodeStatus *bool `json:"useNodeStatus,omitempty"`
	// TieBreakSmallImages scores 1 instead of 0 on nodes holding images too small for the
	// in-tree 23 MiB floor (default true); false gives the in-tree formula exactly.
	// +optional
	TieBreakSmallImages *bool `json:"tieBreakSmallImages,omitempty"`
}

// InstanceIsolationArgs are InstanceIsolation's arguments. The score weight lives in the
// profile, not here.
// +kubebuilder:object:root=true
type InstanceIsolationArgs struct {
	metav1.TypeMeta `json:",inline"`

	// ClassLabels are the pod label keys carrying the class, in order of preference for
	// messages; a pod carrying two of them with different values is refused (default
	// ["ipp-class", "berth.dev/instance-class"]).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=316
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +listType=set
	// +optional
	ClassLabels []string `json:"classLabels,omitempty"`
	// Strict keeps classed and unclassed pods off each other's nodes too (IPP's NotIn
	// semantics). Default false.
	// +optional
	Strict *bool `json:"strict,omitempty"`
	// SpreadReplicas allows one classed pod per node per controller (ReplicaSet,
	// StatefulSet, Job, ...). Default false.
	// +optional
	SpreadReplicas *bool `json:"spreadReplicas,omitempty"`
	// ExemptNamespaces: pods there neither count on a node nor are filtered (DaemonSet and
	// mirror pods always are exempt).
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	ExemptNamespaces []string `json:"exemptNamespaces,omitempty"`
	// ExemptSelector: pods whose labels match it are exempt.
	// +optional
	ExemptSelector *metav1.LabelSelector `json:"exemptSelector,omitempty"`
}

// Summary says where the one-line summary of a placement goes.
// +kubebuilder:validation:Enum=None;Event
type Summary string

// Summary targets.
const (
	// SummaryNone: the record is only served on the debug endpoint.
	SummaryNone Summary = "None"
	// SummaryEvent appends the summary to the message of the pod's Scheduled event.
	SummaryEvent Summary = "Event"
)

// DecisionRecordArgs are DecisionRecord's arguments, per profile.
// +kubebuilder:object:root=true
type DecisionRecordArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Records is how many pods' latest decisions each profile keeps, LRU by last attempt
	// (default 1000).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Records *int32 `json:"records,omitempty"`
	// TopNodes is how many nodes a record keeps in detail: the best-scored feasible ones and
	// the first refused ones; the rest are counted (default 10).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	TopNodes *int32 `json:"topNodes,omitempty"`
	// Summary: None (default) keeps records on the debug endpoint only; Event also appends a
	// one-line summary to the pod's Scheduled event. (No pod annotation: that would need patch
	// on every pod in the scheduler's RBAC and one more API write per placement.)
	// +optional
	Summary *Summary `json:"summary,omitempty"`
}
