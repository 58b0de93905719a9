package targetloadpacking

import (
	"fmt"
	"math"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
)

// Defaults, as upstream.
const (
	DefaultTargetUtilization         int64  = 40
	DefaultRequestsMilliCores        int64  = 1000
	DefaultRequestsMultiplier        string = "1.5"
	argsKind                                = "TargetLoadPackingArgs"
	maxDefaultRequestsMultiplierSane        = 1000
)

// TargetLoadPackingArgs are the plugin's arguments. Field names and types match upstream
// scheduler-plugins (defaultRequestsMultiplier is a string there too), plus Berth's
// loadaware.CommonArgs.
type TargetLoadPackingArgs struct {
	metav1.TypeMeta `json:",inline"`
	loadaware.CommonArgs

	// TargetUtilization is the CPU utilisation percent the plugin packs nodes up to.
	TargetUtilization *int64 `json:"targetUtilization,omitempty"`
	// DefaultRequests is the CPU a container without CPU request or limit is assumed to use.
	DefaultRequests v1.ResourceList `json:"defaultRequests,omitempty"`
	// DefaultRequestsMultiplier scales CPU requests of containers without a CPU limit.
	DefaultRequestsMultiplier *string `json:"defaultRequestsMultiplier,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (a *TargetLoadPackingArgs) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	out := *a
	out.CommonArgs = a.CommonArgs.DeepCopy()
	if a.TargetUtilization != nil {
		v := *a.TargetUtilization
		out.TargetUtilization = &v
	}
	if a.DefaultRequests != nil {
		out.DefaultRequests = a.DefaultRequests.DeepCopy()
	}
	if a.DefaultRequestsMultiplier != nil {
		v := *a.DefaultRequestsMultiplier
		out.DefaultRequestsMultiplier = &v
	}
	return &out
}

// SetDefaults fills unset fields. Unlike upstream, explicit out-of-range values are kept so
// Validate reports them instead of silently replacing them.
func (a *TargetLoadPackingArgs) SetDefaults() {
	a.CommonArgs.SetDefaults()
	if a.TargetUtilization == nil {
		v := DefaultTargetUtilization
		a.TargetUtilization = &v
	}
	if a.DefaultRequests == nil {
		a.DefaultRequests = v1.ResourceList{}
	}
	if _, ok := a.DefaultRequests[v1.ResourceCPU]; !ok {
		a.DefaultRequests[v1.ResourceCPU] = *resource.NewMilliQuantity(DefaultRequestsMilliCores, resource.DecimalSI)
	}
	if a.DefaultRequestsMultiplier == nil {
		v := DefaultRequestsMultiplier
		a.DefaultRequestsMultiplier = &v
	}
}

// Validate checks defaulted args; paths are relative to the args root.
func (a *TargetLoadPackingArgs) Validate() field.ErrorList {
	errs := loadaware.CheckKind(nil, a.Kind, argsKind)
	errs = append(errs, a.CommonArgs.Validate(nil)...)
	// 100 is allowed: the score is then 100 up to full load, 0 beyond.
	if t := *a.TargetUtilization; t < 1 || t > 100 {
		errs = append(errs, field.Invalid(field.NewPath("targetUtilization"), t, "must be a percentage between 1 and 100"))
	}
	for r, q := range a.DefaultRequests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(field.NewPath("defaultRequests").Key(string(r)), q.String(), "must not be negative"))
		}
	}
	if _, err := parseMultiplier(*a.DefaultRequestsMultiplier); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("defaultRequestsMultiplier"), *a.DefaultRequestsMultiplier, err.Error()))
	}
	return errs
}

func parseMultiplier(s string) (float64, error) {
	m, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("must be a decimal number in a string, e.g. \"1.5\"")
	}
	if math.IsNaN(m) || m <= 0 || m > maxDefaultRequestsMultiplierSane {
		return 0, fmt.Errorf("must be greater than 0 and at most %d", maxDefaultRequestsMultiplierSane)
	}
	return m, nil
}

// ParseArgs decodes (strictly), defaults and validates TargetLoadPacking args exactly as the
// scheduler does; the operator calls it to reject a configuration before rolling it out.
// obj may be nil, a *runtime.Unknown (JSON or YAML), or a *TargetLoadPackingArgs (copied).
func ParseArgs(obj runtime.Object) (*TargetLoadPackingArgs, error) {
	args := &TargetLoadPackingArgs{}
	if typed, ok := obj.(*TargetLoadPackingArgs); ok {
		if typed != nil {
			args = typed.DeepCopyObject().(*TargetLoadPackingArgs)
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
