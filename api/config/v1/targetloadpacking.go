package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TargetLoadPackingArgs are TargetLoadPacking's arguments: upstream scheduler-plugins' names
// and types (defaultRequestsMultiplier is a string there too) plus LoadAwareArgs.
// +berth:plugin:name=TargetLoadPacking,order=10
// +berth:plugin:doc=TargetLoadPacking packs nodes up to a target of measured CPU utilisation.
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
	// +kubebuilder:validation:XValidation:rule="double(self) <= 10.0",message="varianceMargin must be at most 10"
	// +optional
	VarianceMargin *Decimal `json:"varianceMargin,omitempty"`
}

// TargetLoadPacking's defaults.
const (
	DefaultTargetUtilization  int64   = 40
	DefaultRequestsMilliCores int64   = 1000
	DefaultRequestsMultiplier string  = "1.5"
	DefaultVarianceMargin     Decimal = "0"
)

// SetDefaults_TargetLoadPackingArgs fills unset fields.
func SetDefaults_TargetLoadPackingArgs(obj *TargetLoadPackingArgs) {
	SetDefaults_LoadAwareArgs(&obj.LoadAwareArgs)
	setDefault(&obj.TargetUtilization, DefaultTargetUtilization)
	if obj.DefaultRequests == nil {
		obj.DefaultRequests = corev1.ResourceList{}
	}
	if _, ok := obj.DefaultRequests[corev1.ResourceCPU]; !ok {
		obj.DefaultRequests[corev1.ResourceCPU] = *resource.NewMilliQuantity(DefaultRequestsMilliCores, resource.DecimalSI)
	}
	setDefault(&obj.DefaultRequestsMultiplier, DefaultRequestsMultiplier)
	setDefault(&obj.VarianceMargin, DefaultVarianceMargin)
}
