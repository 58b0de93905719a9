package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LowRiskOverCommitmentArgs are LowRiskOverCommitment's arguments: upstream's names plus
// LoadAwareArgs.
// +berth:plugin:name=LowRiskOverCommitment,order=30
// +berth:plugin:doc=LowRiskOverCommitment scores nodes by the risk that their pods' limits and measured
// +berth:plugin:doc=load overrun allocatable.
// +kubebuilder:object:root=true
type LowRiskOverCommitmentArgs struct {
	metav1.TypeMeta `json:",inline"`
	LoadAwareArgs   `json:",inline"`

	// SmoothingWindowSize is how many samples the measured standard deviation is scaled up by
	// (σ·√size), as upstream, so a short window's deviation stands for the longer run
	// (default 5).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	SmoothingWindowSize *int64 `json:"smoothingWindowSize,omitempty"`
	// RiskLimitWeights weighs, per resource, the risk from limits over allocatable against the
	// risk from measured load: 1 counts limits only, 0 load only (default 0.5 each).
	// +optional
	RiskLimitWeights *RiskLimitWeights `json:"riskLimitWeights,omitempty"`
}

// RiskLimitWeights are LowRiskOverCommitment's per-resource weights, decimals between 0 and 1.
// Upstream's map of the same two keys decodes into it.
type RiskLimitWeights struct {
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	// +optional
	CPU *Decimal `json:"cpu,omitempty"`
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	// +optional
	Memory *Decimal `json:"memory,omitempty"`
}

// LowRiskOverCommitment's defaults, as upstream.
const (
	DefaultSmoothingWindowSize int64   = 5
	DefaultRiskLimitWeight     Decimal = "0.5"
)

// SetDefaults_LowRiskOverCommitmentArgs fills unset fields; an explicit weight stays, so
// validation names one out of range instead of replacing it (upstream replaces it with 0.5).
func SetDefaults_LowRiskOverCommitmentArgs(obj *LowRiskOverCommitmentArgs) {
	SetDefaults_LoadAwareArgs(&obj.LoadAwareArgs)
	setDefault(&obj.SmoothingWindowSize, DefaultSmoothingWindowSize)
	setDefault(&obj.RiskLimitWeights, RiskLimitWeights{})
	setDefault(&obj.RiskLimitWeights.CPU, DefaultRiskLimitWeight)
	setDefault(&obj.RiskLimitWeights.Memory, DefaultRiskLimitWeight)
}
