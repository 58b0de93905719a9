package instanceisolation

import (
	"k8s.io/apimachinery/pkg/runtime"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// Args configures InstanceIsolation, defined in api/config/v1 (defaults there, validation in
// pkg/scheduler/apis/config). The score weight lives in the profile, not here.
type Args = configv1.InstanceIsolationArgs

// DefaultClassLabels are the pod label keys that carry an instance class: IPP's own key, so
// pods written for the Instance-per-Pod webhook keep working, and Berth's.
var DefaultClassLabels = configv1.DefaultClassLabels

// ParseArgs decodes (strictly: unknown fields are errors), defaults and validates the args
// exactly as the scheduler does. obj may be nil, a *runtime.Unknown holding JSON or YAML, or
// an *Args. The result has every pointer set and ClassLabels non-empty.
func ParseArgs(obj runtime.Object) (*Args, error) {
	return config.Parse(obj, Name, config.ValidateInstanceIsolationArgs)
}
