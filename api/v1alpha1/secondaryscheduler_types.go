package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/berth-sched/berth/api/config/v1"
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

// ProfileOptions are the settings of spec.plugins that are not a plugin (PluginSet, generated
// from the plugin table's markers, embeds them).
type ProfileOptions struct {
	// DisableDefaultScore turns off the upstream score plugins that pull against load-aware
	// packing (NodeResourcesBalancedAllocation, NodeResourcesFit scoring), as upstream's
	// TargetLoadPacking example does, and PodTopologySpread's system default constraints,
	// which spread every workload's replicas across nodes (its args become defaultingType
	// List with no constraints; the constraints a pod states still apply).
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
	Args configv1.InstanceIsolationArgs `json:"args,omitempty"`
}

// DecisionRecordPlugin configures DecisionRecord: enabled, and the plugin's args inline
// (records, topNodes, summary).
type DecisionRecordPlugin struct {
	// Enabled records decisions (default true); false leaves DecisionRecord out of every
	// profile: the scheduler then answers RecordingDisabled.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	configv1.DecisionRecordArgs `json:",inline"`
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
