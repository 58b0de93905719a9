package targetloadpacking

import (
	"k8s.io/apimachinery/pkg/runtime"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// TargetLoadPackingArgs are the plugin's arguments, defined in api/config/v1 (defaults there,
// validation in pkg/scheduler/apis/config).
type TargetLoadPackingArgs = configv1.TargetLoadPackingArgs

// Defaults, as upstream.
const (
	DefaultTargetUtilization  = configv1.DefaultTargetUtilization
	DefaultRequestsMilliCores = configv1.DefaultRequestsMilliCores
	DefaultRequestsMultiplier = configv1.DefaultRequestsMultiplier
)

// ParseArgs decodes (strictly), defaults and validates TargetLoadPacking args exactly as the
// scheduler does. obj may be nil, a *runtime.Unknown (JSON or YAML), or a
// *TargetLoadPackingArgs (copied).
func ParseArgs(obj runtime.Object) (*TargetLoadPackingArgs, error) {
	return config.Parse(obj, Name, config.ValidateTargetLoadPackingArgs)
}

// parseMultiplier reads validated args' defaultRequestsMultiplier.
func parseMultiplier(s string) (float64, error) { return config.DefaultRequestsMultiplier(s) }

// parseMargin reads validated args' varianceMargin.
func parseMargin(d configv1.Decimal) (float64, error) { return config.VarianceMargin(d) }
