package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LoadVariationRiskBalancingArgs are LoadVariationRiskBalancing's arguments: upstream's names
// plus LoadAwareArgs.
// +berth:plugin:name=LoadVariationRiskBalancing,order=20
// +berth:plugin:doc=LoadVariationRiskBalancing balances nodes by the mean and deviation of their measured load.
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

// LoadVariationRiskBalancing's defaults, as upstream.
const (
	DefaultSafeVarianceMargin      Decimal = "1"
	DefaultSafeVarianceSensitivity Decimal = "1"
)

// SetDefaults_LoadVariationRiskBalancingArgs fills unset fields.
func SetDefaults_LoadVariationRiskBalancingArgs(obj *LoadVariationRiskBalancingArgs) {
	SetDefaults_LoadAwareArgs(&obj.LoadAwareArgs)
	setDefault(&obj.SafeVarianceMargin, DefaultSafeVarianceMargin)
	setDefault(&obj.SafeVarianceSensitivity, DefaultSafeVarianceSensitivity)
}
