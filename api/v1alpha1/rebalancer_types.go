package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Rebalancer condition types.
const (
	// RebalancerConditionMetrics is True when the last round read a fresh, well-formed load
	// document for the pool; False names why no action was possible (watcher unreachable,
	// garbage, expired).
	RebalancerConditionMetrics = "MetricsAvailable"
	// RebalancerConditionActive is True when the last round was allowed to move pods (hot and
	// enough cold nodes, not paused); False names why it was not (no nodes selected, nothing
	// hot, too few cold nodes, paused, dry run).
	RebalancerConditionActive = "Active"
)

// RebalancerOptOutAnnotation on a pod with the value "false" keeps the rebalancer away from it.
const RebalancerOptOutAnnotation = "berth.dev/rebalance"

// Rebalancer moves pods that berth-scheduler placed off nodes that stay above a high load
// threshold, onto capacity that cold nodes of the same pool have, by evicting them through the
// Eviction API so berth-scheduler places them again on measured load. It is cluster-scoped: it
// acts on a pool of nodes, and only the operator (when started with --rebalancer) acts on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rebal,categories=berth
// +kubebuilder:printcolumn:name="DryRun",type=boolean,JSONPath=`.spec.dryRun`
// +kubebuilder:printcolumn:name="Round",type=integer,JSONPath=`.status.lastRound.round`
// +kubebuilder:printcolumn:name="Hot",type=integer,JSONPath=`.status.lastRound.hotNodes`
// +kubebuilder:printcolumn:name="Cold",type=integer,JSONPath=`.status.lastRound.coldNodes`
// +kubebuilder:printcolumn:name="Evicted",type=integer,JSONPath=`.status.lastRound.evictions`
// +kubebuilder:printcolumn:name="Metrics",type=string,JSONPath=`.status.conditions[?(@.type=="MetricsAvailable")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Rebalancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RebalancerSpec   `json:"spec"`
	Status RebalancerStatus `json:"status,omitempty"`
}

// ResourceThresholds are per-resource utilisation thresholds in percent of a node's capacity.
// A resource left out is not considered.
// +kubebuilder:validation:MinProperties=1
type ResourceThresholds struct {
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	CPU *int32 `json:"cpu,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Memory *int32 `json:"memory,omitempty"`
}

// RebalancerSpec is the relief policy of one node pool.
// +kubebuilder:validation:XValidation:rule="!has(self.lowThresholds.cpu) || !has(self.highThresholds.cpu) || self.lowThresholds.cpu < self.highThresholds.cpu",message="lowThresholds.cpu must be below highThresholds.cpu",fieldPath=".lowThresholds.cpu"
// +kubebuilder:validation:XValidation:rule="!has(self.lowThresholds.memory) || !has(self.highThresholds.memory) || self.lowThresholds.memory < self.highThresholds.memory",message="lowThresholds.memory must be below highThresholds.memory",fieldPath=".lowThresholds.memory"
// +kubebuilder:validation:XValidation:rule="(has(self.lowThresholds.cpu) == has(self.highThresholds.cpu)) && (has(self.lowThresholds.memory) == has(self.highThresholds.memory))",message="lowThresholds and highThresholds must name the same resources",fieldPath=".lowThresholds"
type RebalancerSpec struct {
	// WatcherAddress is the load watcher's base URL (http or https, no path), the same one the
	// scheduler's load-aware plugins read.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/?#\s]+$`
	WatcherAddress string `json:"watcherAddress"`

	// SchedulerNames are berth-scheduler's profile names: only pods with one of them in
	// spec.schedulerName are moved, so their new placement is load-aware again.
	// +kubebuilder:default={"berth-scheduler"}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:XValidation:rule="self != 'default-scheduler'",message="default-scheduler does not place pods on measured load; name berth-scheduler profiles"
	// +listType=set
	// +optional
	SchedulerNames []string `json:"schedulerNames,omitempty"`

	// NodeSelector picks the node pool (all nodes when empty). A selector matching no node is
	// reported in the Active condition and nothing is done.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// IntervalSeconds between rounds.
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=3600
	// +optional
	IntervalSeconds int32 `json:"intervalSeconds,omitempty"`

	// LowThresholds: a node below all of them (fresh metrics) is cold and may take pods.
	LowThresholds ResourceThresholds `json:"lowThresholds"`
	// HighThresholds: a node above any of them for AnomalyRounds consecutive rounds is hot.
	HighThresholds ResourceThresholds `json:"highThresholds"`

	// AnomalyRounds is how many consecutive rounds a node must be above a high threshold
	// before pods are moved off it: a short spike does not move anything.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	AnomalyRounds int32 `json:"anomalyRounds,omitempty"`

	// MinColdNodes: act only while more than this many nodes of the pool are cold.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinColdNodes int32 `json:"minColdNodes,omitempty"`

	// MetricsExpirySeconds: a node whose newest sample is older is neither hot nor cold, and a
	// document whose newest sample is older stops all action.
	// +kubebuilder:default=180
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=3600
	// +optional
	MetricsExpirySeconds int32 `json:"metricsExpirySeconds,omitempty"`

	// DryRun runs every decision, asks the API server for each eviction with dryRun=All (so a
	// PodDisruptionBudget still answers), records Events and metrics, and evicts nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Paused stops the rounds without deleting the policy.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Victims restricts which pods may move.
	// +kubebuilder:default={}
	// +optional
	Victims RebalancerVictims `json:"victims,omitempty"`

	// Limits bound how much one round and the whole rebalancer may evict.
	// +kubebuilder:default={}
	// +optional
	Limits RebalancerLimits `json:"limits,omitempty"`
}

// RebalancerVictims restricts which pods may be evicted. DaemonSet, mirror and static pods, pods
// without a controller, pods in kube-system and in the operator's own namespace, and pods
// annotated berth.dev/rebalance: "false" are never evicted.
type RebalancerVictims struct {
	// ExcludedNamespaces are never touched (besides kube-system and the operator's namespace).
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	// +optional
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
	// MaxPriority: pods with a higher priority are never evicted.
	// +kubebuilder:default=999999999
	// +optional
	MaxPriority *int32 `json:"maxPriority,omitempty"`
	// AllowLocalStorage lets pods with emptyDir or hostPath volumes move (their data is lost).
	// +optional
	AllowLocalStorage bool `json:"allowLocalStorage,omitempty"`
	// AllowPVC lets pods with PersistentVolumeClaims move.
	// +optional
	AllowPVC bool `json:"allowPVC,omitempty"`
}

// RebalancerLimits bound evictions.
type RebalancerLimits struct {
	// PerNode per hot node per round.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	PerNode int32 `json:"perNode,omitempty"`
	// PerNamespace per round.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	PerNamespace int32 `json:"perNamespace,omitempty"`
	// PerOwner per controller (ReplicaSet, StatefulSet, Job...) per round.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	PerOwner int32 `json:"perOwner,omitempty"`
	// PerRound across the pool.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	PerRound int32 `json:"perRound,omitempty"`
	// EvictionsPerSecond is the global rate of eviction requests.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	EvictionsPerSecond int32 `json:"evictionsPerSecond,omitempty"`
	// OwnerCooldownSeconds: a controller one of whose pods was moved is not moved again for this
	// long, and the node its new pod lands on is not drained for this long either.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	OwnerCooldownSeconds int32 `json:"ownerCooldownSeconds,omitempty"`
}

// RebalancerStatus is written by the operator only.
type RebalancerStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastRound summarises the newest round.
	// +optional
	LastRound *RebalancerRound `json:"lastRound,omitempty"`
	// Moves are the evictions still inside their cooldown, written before each eviction is
	// requested: an operator restarted mid-round (or a new leader) reads them and neither moves
	// the same owner again nor drains the nodes that took its pods.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	// +optional
	Moves []RebalancerMove `json:"moves,omitempty"`
}

// RebalancerRound is one round's outcome.
type RebalancerRound struct {
	Round int64       `json:"round"`
	Time  metav1.Time `json:"time"`
	// Nodes in the pool; Hot counts nodes acted on (hot for anomalyRounds rounds); Unknown
	// counts nodes with stale or missing metrics.
	Nodes     int32 `json:"nodes"`
	HotNodes  int32 `json:"hotNodes"`
	ColdNodes int32 `json:"coldNodes"`
	Unknown   int32 `json:"unknownNodes"`
	// Evictions accepted by the API server (with dryRun, accepted as a dry run).
	Evictions int32 `json:"evictions"`
	// Refused counts evictions a PodDisruptionBudget refused (429).
	Refused int32 `json:"refused"`
	DryRun  bool  `json:"dryRun,omitempty"`
	// Usage says where pod usage came from: "measured" (the watcher's per-pod numbers) or
	// "requests" (the watcher has none for some pods; their requests stand in).
	// +optional
	Usage string `json:"usage,omitempty"`
	// Message is a one-line summary.
	// +optional
	Message string `json:"message,omitempty"`
}

// RebalancerMove is one eviction inside its cooldown.
type RebalancerMove struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodUID    string `json:"podUID"`
	// Owner is the pod's controller as Kind/name.
	Owner    string      `json:"owner"`
	OwnerUID string      `json:"ownerUID"`
	From     string      `json:"from"`
	Round    int64       `json:"round"`
	Time     metav1.Time `json:"time"`
	DryRun   bool        `json:"dryRun,omitempty"`
}

// +kubebuilder:object:root=true

// RebalancerList is a list of Rebalancers.
type RebalancerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Rebalancer `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Rebalancer{}, &RebalancerList{})
		return nil
	})
}
