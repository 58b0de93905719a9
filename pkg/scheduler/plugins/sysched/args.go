package sysched

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-sched/berth/pkg/scheduler/pluginargs"
)

// Defaults match upstream scheduler-plugins' code (not its README).
const (
	DefaultProfileNamespace = "default"
	DefaultProfileName      = "all-syscalls"
)

// Args configures SySched. SyschedCRDNamespace and SyschedFullCRDName are the names used by
// upstream's early README; they are accepted so existing configurations keep working.
type Args struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultProfileNamespace and DefaultProfileName name the SeccompProfile whose syscalls
	// stand for "unconfined". For the cluster-scoped SPO shape only the name is used.
	DefaultProfileNamespace string `json:"defaultProfileNamespace,omitempty"`
	DefaultProfileName      string `json:"defaultProfileName,omitempty"`

	// Deprecated aliases of the two fields above.
	SyschedCRDNamespace string `json:"syschedCRDNamespace,omitempty"`
	SyschedFullCRDName  string `json:"syschedFullCRDName,omitempty"`

	// DaemonSetPods is Exclude (default) or Count. Excluded, pods a DaemonSet owns are left out
	// of every node's syscall union and pod count: they run on every node, so they say nothing
	// about which node suits a pod, and one RuntimeDefault or unconfined DaemonSet (a CNI, a
	// log shipper, Berth's own agent) would fill every node's union and flatten every score.
	DaemonSetPods string `json:"daemonSetPods,omitempty"`
	// ExcludedPodSelector leaves out, likewise, other pods that run everywhere (static pods
	// of a kubelet, a per-node Deployment) by label.
	ExcludedPodSelector *metav1.LabelSelector `json:"excludedPodSelector,omitempty"`

	// RuntimeDefault is the set a container with `seccompProfile: RuntimeDefault` counts as:
	// Containerd (default; containerd's default profile, shipped as data with its source and
	// version) or Full (every syscall, as KEP-399 reads it).
	RuntimeDefault string `json:"runtimeDefault,omitempty"`
	// RuntimeDefaultProfileName, set, names a SeccompProfile whose syscalls stand for
	// RuntimeDefault instead (another runtime, another version); it overrides RuntimeDefault.
	RuntimeDefaultProfileName string `json:"runtimeDefaultProfileName,omitempty"`
	// UnsetProfile is what a container with no seccomp profile at all counts as: Unconfined
	// (default; the kubelet's default) or RuntimeDefault (for kubelets run with
	// --seccomp-default).
	UnsetProfile string `json:"unsetProfile,omitempty"`

	// FilterNotInstalled (default true) refuses nodes where SPO reports a profile the pod
	// needs as not Installed (SecurityProfileNodeStatus). It acts only on profiles SPO reports
	// node states for, so without SPO's node-status objects it does nothing.
	FilterNotInstalled *bool `json:"filterNotInstalled,omitempty"`
}

func (a *Args) filterNotInstalled() bool { return a.FilterNotInstalled == nil || *a.FilterNotInstalled }

// RuntimeDefault and UnsetProfile values.
const (
	RuntimeDefaultContainerd = "Containerd"
	RuntimeDefaultFull       = "Full"
	UnsetUnconfined          = "Unconfined"
	UnsetRuntimeDefault      = "RuntimeDefault"
)

// DaemonSetPods values.
const (
	DaemonSetPodsExclude = "Exclude"
	DaemonSetPodsCount   = "Count"
)

// DeepCopyObject lets *Args travel as a runtime.Object (e.g. from the operator) into ParseArgs.
func (a *Args) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	c := *a
	c.ExcludedPodSelector = a.ExcludedPodSelector.DeepCopy()
	if a.FilterNotInstalled != nil {
		v := *a.FilterNotInstalled
		c.FilterNotInstalled = &v
	}
	return &c
}

// ParseArgs decodes (strictly: unknown fields are errors), defaults and validates SySched args
// exactly as the scheduler does. obj may be nil, a *runtime.Unknown holding JSON or YAML, or an
// *Args.
func ParseArgs(obj runtime.Object) (*Args, error) {
	return pluginargs.Parse(obj, Name, decodeStrict, func(*Args) {}, setDefaultsAndValidate)
}

var argFields = []string{"defaultProfileNamespace", "defaultProfileName", "syschedCRDNamespace", "syschedFullCRDName", "daemonSetPods", "excludedPodSelector", "runtimeDefault", "runtimeDefaultProfileName", "unsetProfile", "filterNotInstalled"}

func decodeStrict(u *runtime.Unknown, into *Args) error {
	_, err := pluginargs.Decode(u, into, argFields)
	return err
}

func setDefaultsAndValidate(a *Args) field.ErrorList {
	var errs field.ErrorList
	merge := func(canonical *string, alias string, cPath, aPath string) {
		switch {
		case alias == "":
		case *canonical == "":
			*canonical = alias
		case *canonical != alias:
			errs = append(errs, field.Invalid(field.NewPath(aPath), alias,
				fmt.Sprintf("conflicts with %s=%q; set only one of them", cPath, *canonical)))
		}
	}
	merge(&a.DefaultProfileNamespace, a.SyschedCRDNamespace, "defaultProfileNamespace", "syschedCRDNamespace")
	merge(&a.DefaultProfileName, a.SyschedFullCRDName, "defaultProfileName", "syschedFullCRDName")
	if a.DefaultProfileNamespace == "" {
		a.DefaultProfileNamespace = DefaultProfileNamespace
	}
	if a.DefaultProfileName == "" {
		a.DefaultProfileName = DefaultProfileName
	}
	for _, msg := range validation.IsDNS1123Label(a.DefaultProfileNamespace) {
		errs = append(errs, field.Invalid(field.NewPath("defaultProfileNamespace"), a.DefaultProfileNamespace, msg))
	}
	for _, msg := range validation.IsDNS1123Subdomain(a.DefaultProfileName) {
		errs = append(errs, field.Invalid(field.NewPath("defaultProfileName"), a.DefaultProfileName, msg))
	}
	switch a.DaemonSetPods {
	case "":
		a.DaemonSetPods = DaemonSetPodsExclude
	case DaemonSetPodsExclude, DaemonSetPodsCount:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("daemonSetPods"), a.DaemonSetPods, []string{DaemonSetPodsExclude, DaemonSetPodsCount}))
	}
	oneOf := func(v *string, path, def string, allowed ...string) {
		if *v == "" {
			*v = def
			return
		}
		for _, x := range allowed {
			if *v == x {
				return
			}
		}
		errs = append(errs, field.NotSupported(field.NewPath(path), *v, allowed))
	}
	oneOf(&a.RuntimeDefault, "runtimeDefault", RuntimeDefaultContainerd, RuntimeDefaultContainerd, RuntimeDefaultFull)
	oneOf(&a.UnsetProfile, "unsetProfile", UnsetUnconfined, UnsetUnconfined, UnsetRuntimeDefault)
	if a.RuntimeDefaultProfileName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(a.RuntimeDefaultProfileName) {
			errs = append(errs, field.Invalid(field.NewPath("runtimeDefaultProfileName"), a.RuntimeDefaultProfileName, msg))
		}
	}
	if a.ExcludedPodSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(a.ExcludedPodSelector,
			metav1validation.LabelSelectorValidationOptions{}, field.NewPath("excludedPodSelector"))...)
	}
	return errs
}
