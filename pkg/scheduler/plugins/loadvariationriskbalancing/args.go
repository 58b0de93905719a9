package loadvariationriskbalancing

import (
	"fmt"
	"math"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
)

// Defaults, as upstream.
const (
	DefaultSafeVarianceMargin      = 1.0
	DefaultSafeVarianceSensitivity = 1.0
	argsKind                       = "LoadVariationRiskBalancingArgs"
)

// LoadVariationRiskBalancingArgs are the plugin's arguments: upstream's names plus Berth's
// loadaware.CommonArgs.
type LoadVariationRiskBalancingArgs struct {
	metav1.TypeMeta `json:",inline"`
	loadaware.CommonArgs

	// SafeVarianceMargin multiplies the (sensitivity-adjusted) standard deviation.
	SafeVarianceMargin *float64 `json:"safeVarianceMargin,omitempty"`
	// SafeVarianceSensitivity is the root taken of the standard deviation (1/sensitivity
	// power); 0 ignores the deviation entirely.
	SafeVarianceSensitivity *float64 `json:"safeVarianceSensitivity,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (a *LoadVariationRiskBalancingArgs) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	out := *a
	out.CommonArgs = a.CommonArgs.DeepCopy()
	if a.SafeVarianceMargin != nil {
		v := *a.SafeVarianceMargin
		out.SafeVarianceMargin = &v
	}
	if a.SafeVarianceSensitivity != nil {
		v := *a.SafeVarianceSensitivity
		out.SafeVarianceSensitivity = &v
	}
	return &out
}

// SetDefaults fills unset fields; explicit negative values are kept for Validate to name
// (upstream silently replaces them with 1).
func (a *LoadVariationRiskBalancingArgs) SetDefaults() {
	a.CommonArgs.SetDefaults()
	if a.SafeVarianceMargin == nil {
		v := DefaultSafeVarianceMargin
		a.SafeVarianceMargin = &v
	}
	if a.SafeVarianceSensitivity == nil {
		v := DefaultSafeVarianceSensitivity
		a.SafeVarianceSensitivity = &v
	}
}

// Validate checks defaulted args; paths are relative to the args root.
func (a *LoadVariationRiskBalancingArgs) Validate() field.ErrorList {
	errs := loadaware.CheckKind(nil, a.Kind, argsKind)
	errs = append(errs, a.CommonArgs.Validate(nil)...)
	check := func(name string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), v, "must be a finite number >= 0"))
		}
	}
	check("safeVarianceMargin", *a.SafeVarianceMargin)
	check("safeVarianceSensitivity", *a.SafeVarianceSensitivity)
	return errs
}

// ParseArgs decodes (strictly), defaults and validates LoadVariationRiskBalancing args exactly
// as the scheduler does; the operator calls it before rolling a configuration out.
// obj may be nil, a *runtime.Unknown (JSON or YAML), or a *LoadVariationRiskBalancingArgs.
func ParseArgs(obj runtime.Object) (*LoadVariationRiskBalancingArgs, error) {
	args := &LoadVariationRiskBalancingArgs{}
	if typed, ok := obj.(*LoadVariationRiskBalancingArgs); ok {
		if typed != nil {
			args = typed.DeepCopyObject().(*LoadVariationRiskBalancingArgs)
		}
	} else if err := loadaware.DecodeStrict(obj, args); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	args.SetDefaults()
	if errs := args.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s args: %w", Name, errs.ToAggregate())
	}
	return args, nil
}
