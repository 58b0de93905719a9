package imagelocality

import (
	"k8s.io/apimachinery/pkg/runtime"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// Args configures NodeImageLocality, defined in api/config/v1 (defaults there, validation in
// pkg/scheduler/apis/config). The score weight lives in the profile, not here.
type Args = configv1.NodeImageLocalityArgs

// Defaults and bounds of the arguments.
const (
	DefaultAssumePulledFor = configv1.DefaultAssumePulledFor
	MaxAssumePulledFor     = config.MaxAssumePulledFor
)

// ParseArgs decodes (strictly: unknown fields are errors), defaults and validates the args
// exactly as the scheduler does. obj may be nil, a *runtime.Unknown holding JSON or YAML, or
// an *Args. The result has every pointer set.
func ParseArgs(obj runtime.Object) (*Args, error) {
	return config.Parse(obj, Name, config.ValidateNodeImageLocalityArgs)
}
