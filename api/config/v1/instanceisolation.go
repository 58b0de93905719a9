package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InstanceIsolationArgs are InstanceIsolation's arguments. The score weight lives in the
// profile, not here.
// +berth:plugin:name=InstanceIsolation,order=60,entry=InstanceIsolationPlugin
// +berth:plugin:doc=InstanceIsolation gives each instance class (pod label ipp-class or
// +berth:plugin:doc=berth.dev/instance-class) nodes of its own, across all namespaces.
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

// DefaultClassLabels are the pod label keys that carry an instance class: IPP's own key, so
// pods written for the Instance-per-Pod webhook keep working, and Berth's.
var DefaultClassLabels = []string{"ipp-class", "berth.dev/instance-class"}

// SetDefaults_InstanceIsolationArgs fills unset fields; an explicit empty classLabels stays
// (and is refused).
func SetDefaults_InstanceIsolationArgs(obj *InstanceIsolationArgs) {
	if obj.ClassLabels == nil {
		obj.ClassLabels = append([]string(nil), DefaultClassLabels...)
	}
	setDefault(&obj.Strict, false)
	setDefault(&obj.SpreadReplicas, false)
}
