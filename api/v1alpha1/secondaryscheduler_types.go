package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagementState says how far the operator acts on a SecondaryScheduler.
// +kubebuilder:validation:Enum=Managed;Unmanaged;Removed
type ManagementState string

const (
	// Managed: the operator renders, validates and applies the scheduler and keeps it so.
	Managed ManagementState = "Managed"
	// Unmanaged: the operator leaves every object as it is (manual edits persist) and only
	// reports status.
	Unmanaged ManagementState = "Unmanaged"
	// Removed: the operator deletes everything it created for this resource but keeps the
	// resource itself.
	Removed ManagementState = "Removed"
)

// LogLevel maps to the scheduler's -v flag: Normal 2, Debug 4, Trace 6, TraceAll 8.
// +kubebuilder:validation:Enum=Normal;Debug;Trace;TraceAll
type LogLevel string

// Log levels.
const (
	LogNormal   LogLevel = "Normal"
	LogDebug    LogLevel = "Debug"
	LogTrace    LogLevel = "Trace"
	LogTraceAll LogLevel = "TraceAll"
)

// SecondaryScheduler runs one berth-scheduler Deployment beside the cluster's default
// scheduler. It is namespaced: the operator puts the Deployment, ConfigMap, ServiceAccount and
// leader-election Lease in the resource's own namespace, so namespaced owner references garbage
// collect them; only the cluster-wide RBAC needs the finalizer.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=secsched,categories=berth
// +kubebuilder:printcolumn:name="Scheduler",type=string,JSONPath=`.spec.schedulerName`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.managementState`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.status.configHash`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecondaryScheduler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SecondarySchedulerSpec   `json:"spec"`
	Status SecondarySchedulerStatus `json:"status,omitempty"`
}

// SecondarySchedulerSpec is the desired scheduler.
// +kubebuilder:validation:XValidation:rule="has(self.plugins) != has(self.configMapRef)",message="set exactly one of plugins and configMapRef"
type SecondarySchedulerSpec struct {
	// ManagementState: Managed (default), Unmanaged or Removed.
	// +kubebuilder:default=Managed
	// +optional
	ManagementState ManagementState `json:"managementState,omitempty"`

	// SchedulerName is the profile name pods opt in with (spec.schedulerName) and the name of
	// the scheduler's leader-election Lease in this namespace.
	// +kubebuilder:default=berth-scheduler
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'default-scheduler'",message="default-scheduler is the cluster's default scheduler; choose another name"
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`

	// Plugins is the structured plugin set; the operator renders one profile from it.
	// +optional
	Plugins *PluginSet `json:"plugins,omitempty"`

	// ConfigMapRef names a ConfigMap in this namespace holding a raw KubeSchedulerConfiguration.
	// It must contain a profile named schedulerName. The operator overrides clientConnection
	// and leaderElection's resource name and namespace.
	// +optional
	ConfigMapRef *ConfigMapKeyReference `json:"configMapRef,omitempty"`

	// Image of berth-scheduler.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	// ImagePullPolicy of the scheduler container.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Replicas of the scheduler (active/passive through the Lease). More than one adds a
	// PodDisruptionBudget (minAvailable 1) and spreads replicas across nodes.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// LogLevel: Normal (default), Debug, Trace, TraceAll.
	// +kubebuilder:default=Normal
	// +optional
	LogLevel LogLevel `json:"logLevel,omitempty"`

	// Resources of the scheduler container (default requests: 100m CPU, 128Mi memory).
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// NodeSelector of the scheduler pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the scheduler pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// PriorityClassName of the scheduler pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// ConfigMapKeyReference points at one key of a ConfigMap in the resource's namespace.
type ConfigMapKeyReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key holding the configuration (default config.yaml).
	// +kubebuilder:default=config.yaml
	// +optional
	Key string `json:"key,omitempty"`
}

// PluginSet lists the Berth plugins the profile enables on top of the upstream defaults. At
// least one must be set.
// +kubebuilder:validation:MinProperties=1
type PluginSet struct {
	// +optional
	TargetLoadPacking *TargetLoadPackingPlugin `json:"targetLoadPacking,omitempty"`
	// +optional
	LoadVariationRiskBalancing *LoadVariationRiskBalancingPlugin `json:"loadVariationRiskBalancing,omitempty"`
	// +optional
	SySched *SySchedPlugin `json:"sySched,omitempty"`
	// NodeImageLocality scores nodes by the images they already hold (NodeImages from the
	// agents, else node.status.images). Enabling it disables the in-tree ImageLocality in the
	// profile, so images are not counted twice.
	// +optional
	NodeImageLocality *NodeImageLocalityPlugin `json:"nodeImageLocality,omitempty"`
	// InstanceIsolation gives each instance class (pod label ipp-class or
	// berth.dev/instance-class) nodes of its own, across all namespaces.
	// +optional
	InstanceIsolation *InstanceIsolationPlugin `json:"instanceIsolation,omitempty"`
	// DecisionRecord keeps, per pod, why the scheduler placed it where it did (Filter verdicts
	// and Score plugins' scores per node), served on the scheduler's secure port at
	// /debug/berth/explain and read with `kubectl berth explain pod NAME`. Recording is on in
	// every profile rendered from this resource unless enabled is false; leaving the field out
	// records with the plugin's defaults.
	// +optional
	DecisionRecord *DecisionRecordPlugin `json:"decisionRecord,omitempty"`
	// DisableDefaultScore turns off the upstream score plugins that pull against load-aware
	// packing (NodeResourcesBalancedAllocation, NodeResourcesFit scoring), as upstream's
	// TargetLoadPacking example does.
	// +optional
	DisableDefaultScore bool `json:"disableDefaultScore,omitempty"`
}

// Weight of a score plugin.
type Weight struct {
	// Weight of the plugin's score (1..100, default 1).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// LoadAwareArgs are the arguments TargetLoadPacking and LoadVariationRiskBalancing share. They
// mirror pkg/scheduler/plugins/loadaware.CommonArgs (library-mode metricProvider is left out:
// berth-scheduler reads a load watcher). The operator validates them with the plugins' own
// ParseArgs, so rules the CRD cannot express (e.g. URL shape) are reported in Degraded.
type LoadAwareArgs struct {
	// WatcherAddress is the load watcher's base URL, e.g. http://berth-loadwatcher.berth-system:2020.
	// +kubebuilder:validation:MinLength=1
	WatcherAddress string `json:"watcherAddress"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	MetricsExpirySeconds *int64 `json:"metricsExpirySeconds,omitempty"`
	// +kubebuilder:validation:Enum=Neutral;Block
	// +optional
	ExpiredMetricsAction string `json:"expiredMetricsAction,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	NeutralScore *int64 `json:"neutralScore,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	RefreshIntervalSeconds *int64 `json:"refreshIntervalSeconds,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600
	// +optional
	WatcherTimeoutSeconds *int64 `json:"watcherTimeoutSeconds,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	AssumedPodExpirySeconds *int64 `json:"assumedPodExpirySeconds,omitempty"`
	// UsageThresholds turns on the usage Filter: cpu / memory → maximum percent.
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'cpu' || k == 'memory')",message="keys must be cpu or memory"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 1 && self[k] <= 100)",message="values must be percentages between 1 and 100"
	// +optional
	UsageThresholds map[string]int64 `json:"usageThresholds,omitempty"`
}

// TargetLoadPackingPlugin enables TargetLoadPacking.
type TargetLoadPackingPlugin struct {
	Weight `json:",inline"`
	Args   TargetLoadPackingArgs `json:"args"`
}

// TargetLoadPackingArgs mirror the plugin's arguments (same names as upstream).
type TargetLoadPackingArgs struct {
	LoadAwareArgs `json:",inline"`
	// TargetUtilization is the CPU percent nodes are packed up to (default 40).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	TargetUtilization *int64 `json:"targetUtilization,omitempty"`
	// DefaultRequests is the CPU assumed for containers without requests (default 1 CPU).
	// +optional
	DefaultRequests map[corev1.ResourceName]resource.Quantity `json:"defaultRequests,omitempty"`
	// DefaultRequestsMultiplier scales requests of containers without limits, as a decimal
	// string (default "1.5").
	// +optional
	DefaultRequestsMultiplier *string `json:"defaultRequestsMultiplier,omitempty"`
}

// LoadVariationRiskBalancingPlugin enables LoadVariationRiskBalancing.
type LoadVariationRiskBalancingPlugin struct {
	Weight `json:",inline"`
	Args   LoadVariationRiskBalancingArgs `json:"args"`
}

// LoadVariationRiskBalancingArgs mirror the plugin's arguments. The variance knobs are
// decimal strings because CRDs discourage floats ("1.0", "0.5").
type LoadVariationRiskBalancingArgs struct {
	LoadAwareArgs `json:",inline"`
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	SafeVarianceMargin string `json:"safeVarianceMargin,omitempty"`
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	SafeVarianceSensitivity string `json:"safeVarianceSensitivity,omitempty"`
}

// SySchedPlugin enables SySched.
type SySchedPlugin struct {
	Weight `json:",inline"`
	// +optional
	Args SySchedArgs `json:"args,omitempty"`
}

// SySchedArgs mirror the plugin's arguments.
type SySchedArgs struct {
	// Namespace of the "unconfined" SeccompProfile (older, namespaced SPO; default "default").
	// +optional
	DefaultProfileNamespace string `json:"defaultProfileNamespace,omitempty"`
	// Name of the SeccompProfile whose syscalls stand for unconfined pods (default all-syscalls).
	// +optional
	DefaultProfileName string `json:"defaultProfileName,omitempty"`
	// DaemonSetPods: Exclude (default) leaves pods a DaemonSet owns out of every node's
	// syscall union and pod count (they run everywhere and would flatten every score); Count
	// counts them like any pod.
	// +kubebuilder:validation:Enum=Exclude;Count
	// +optional
	DaemonSetPods string `json:"daemonSetPods,omitempty"`
	// ExcludedPodSelector leaves other pods that run on every node out likewise, by label.
	// +optional
	ExcludedPodSelector *metav1.LabelSelector `json:"excludedPodSelector,omitempty"`
	// RuntimeDefault is what a RuntimeDefault container counts as: Containerd (default;
	// containerd's default profile, shipped with Berth) or Full.
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

// NodeImageLocalityPlugin enables NodeImageLocality.
type NodeImageLocalityPlugin struct {
	Weight `json:",inline"`
	// +optional
	Args NodeImageLocalityArgs `json:"args,omitempty"`
}

// NodeImageLocalityArgs mirror the plugin's arguments.
type NodeImageLocalityArgs struct {
	// AssumePulledFor is how long the images of a pod just placed on a node count as present
	// there (the pull is under way); "0s" turns it off. Default 5m, at most 1h.
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	AssumePulledFor string `json:"assumePulledFor,omitempty"`
	// UseNodeStatus reads node.status.images for nodes without a NodeImages object (default true).
	// +optional
	UseNodeStatus *bool `json:"useNodeStatus,omitempty"`
	// TieBreakSmallImages scores 1 instead of 0 on nodes holding images too small for the
	// in-tree 23 MiB floor (default true); false gives the in-tree formula exactly.
	// +optional
	TieBreakSmallImages *bool `json:"tieBreakSmallImages,omitempty"`
}

// InstanceIsolationPlugin enables InstanceIsolation.
type InstanceIsolationPlugin struct {
	// Weight of its class-packing score (default 1; a class fills its nodes before claiming
	// an empty one when the weight outranks the spreading scores, e.g. 10).
	Weight `json:",inline"`
	// IsolatedProfileName adds a second profile with this schedulerName in which
	// InterPodAffinity is disabled and InstanceIsolation enforces the classes: for pods whose
	// only pod-affinity terms are IPP's class anti-affinity (the webhook's "both" mode).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'default-scheduler'",message="default-scheduler is the cluster's default scheduler; choose another name"
	// +optional
	IsolatedProfileName string `json:"isolatedProfileName,omitempty"`
	// +optional
	Args InstanceIsolationArgs `json:"args,omitempty"`
}

// InstanceIsolationArgs mirror the plugin's arguments.
type InstanceIsolationArgs struct {
	// ClassLabels are the pod label keys carrying the class (default ["ipp-class",
	// "berth.dev/instance-class"]).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
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
	// +listType=set
	// +optional
	ExemptNamespaces []string `json:"exemptNamespaces,omitempty"`
	// ExemptSelector: pods whose labels match it are exempt.
	// +optional
	ExemptSelector *metav1.LabelSelector `json:"exemptSelector,omitempty"`
}

// DecisionRecordPlugin configures DecisionRecord; its fields mirror the plugin's arguments
// (pkg/scheduler/plugins/decisionrecord) with the same bounds.
type DecisionRecordPlugin struct {
	// Enabled records decisions (default true); false leaves DecisionRecord out of every
	// profile: the scheduler then answers RecordingDisabled.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
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
	// one-line summary to the pod's Scheduled event.
	// +kubebuilder:validation:Enum=None;Event
	// +optional
	Summary string `json:"summary,omitempty"`
}

// Condition types.
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
)

// SecondarySchedulerStatus is what the operator observed.
type SecondarySchedulerStatus struct {
	// ObservedGeneration is the spec generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ReadyReplicas of the scheduler Deployment.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// ConfigHash is the hash of the KubeSchedulerConfiguration in effect (rolled out); it
	// stays at the last good one while a new configuration is invalid.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`
	// Conditions: Available, Progressing, Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// SecondarySchedulerList is a list of SecondarySchedulers.
type SecondarySchedulerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecondaryScheduler `json:"items"`
}
