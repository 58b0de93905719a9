package loadvariationriskbalancing

import (
	"k8s.io/apimachinery/pkg/runtime"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// LoadVariationRiskBalancingArgs are the plugin's arguments, defined in api/config/v1
// (defaults there, validation in pkg/scheduler/apis/config).
type LoadVariationRiskBalancingArgs = configv1.LoadVariationRiskBalancingArgs

// Defaults, as upstream.
const (
	DefaultSafeVarianceMargin      = configv1.DefaultSafeVarianceMargin
	DefaultSafeVarianceSensitivity = configv1.DefaultSafeVarianceSensitivity
)

// ParseArgs decodes (strictly), defaults and validates LoadVariationRiskBalancing args exactly
// as the scheduler does. obj may be nil, a *runtime.Unknown (JSON or YAML), or a
// *LoadVariationRiskBalancingArgs (copied).
func ParseArgs(obj runtime.Object) (*LoadVariationRiskBalancingArgs, error) {
	return config.Parse(obj, Name, config.ValidateLoadVariationRiskBalancingArgs)
}

// varianceKnobs are validated args' margin and sensitivity as numbers.
func varianceKnobs(a *LoadVariationRiskBalancingArgs) (margin, sensitivity float64) {
	margin, _ = a.SafeVarianceMargin.Float64()
	sensitivity, _ = a.SafeVarianceSensitivity.Float64()
	return margin, sensitivity
}
