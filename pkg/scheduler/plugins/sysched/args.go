package sysched

import (
	"k8s.io/apimachinery/pkg/runtime"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// Args configures SySched, defined in api/config/v1 (defaults there, validation in
// pkg/scheduler/apis/config).
type Args = configv1.SySchedArgs

// Defaults match upstream scheduler-plugins' code (not its README).
const (
	DefaultProfileNamespace = configv1.DefaultProfileNamespace
	DefaultProfileName      = configv1.DefaultProfileName
)

// RuntimeDefault and UnsetProfile values.
const (
	RuntimeDefaultContainerd = configv1.RuntimeDefaultContainerd
	RuntimeDefaultFull       = configv1.RuntimeDefaultFull
	UnsetUnconfined          = configv1.UnsetUnconfined
	UnsetRuntimeDefault      = configv1.UnsetRuntimeDefault
)

// DaemonSetPods values.
const (
	DaemonSetPodsExclude = configv1.DaemonSetPodsExclude
	DaemonSetPodsCount   = configv1.DaemonSetPodsCount
)

func filterNotInstalled(a *Args) bool { return a.FilterNotInstalled == nil || *a.FilterNotInstalled }

// ParseArgs decodes (strictly: unknown fields are errors), defaults and validates SySched args
// exactly as the scheduler does. obj may be nil, a *runtime.Unknown holding JSON or YAML, or an
// *Args.
func ParseArgs(obj runtime.Object) (*Args, error) {
	return config.Parse(obj, Name, config.ValidateSySchedArgs)
}
