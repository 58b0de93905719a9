package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DaemonSetPods values.
const (
	DaemonSetPodsExclude = "Exclude"
	DaemonSetPodsCount   = "Count"
)

// RuntimeDefault and UnsetProfile values.
const (
	RuntimeDefaultContainerd = "Containerd"
	RuntimeDefaultFull       = "Full"
	UnsetUnconfined          = "Unconfined"
	UnsetRuntimeDefault      = "RuntimeDefault"
)

// SySchedArgs are SySched's arguments. SyschedCRDNamespace and SyschedFullCRDName are the names
// upstream's early README used; they are accepted so existing configurations keep working.
// +berth:plugin:name=SySched,order=40,argsOptional
// +berth:plugin:doc=SySched scores nodes by the system calls a pod's seccomp profile adds to those the
// +berth:plugin:doc=node's pods already use (Security Profiles Operator objects).
// +kubebuilder:object:root=true
type SySchedArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultProfileNamespace is the namespace of the "unconfined" SeccompProfile (older,
	// namespaced SPO; default "default"). For the cluster-scoped SPO shape only the name is used.
	// +optional
	DefaultProfileNamespace string `json:"defaultProfileNamespace,omitempty"`
	// DefaultProfileName names the SeccompProfile whose syscalls stand for unconfined pods
	// (default all-syscalls).
	// +optional
	DefaultProfileName string `json:"defaultProfileName,omitempty"`
	// SyschedCRDNamespace is a deprecated alias of defaultProfileNamespace.
	// +optional
	SyschedCRDNamespace string `json:"syschedCRDNamespace,omitempty"`
	// SyschedFullCRDName is a deprecated alias of defaultProfileName.
	// +optional
	SyschedFullCRDName string `json:"syschedFullCRDName,omitempty"`
	// DaemonSetPods: Exclude (default) leaves pods a DaemonSet owns out of every node's
	// syscall union and pod count (they run on every node, so they say nothing about which
	// node suits a pod, and would flatten every score); Count counts them like any pod.
	// +kubebuilder:validation:Enum=Exclude;Count
	// +optional
	DaemonSetPods string `json:"daemonSetPods,omitempty"`
	// ExcludedPodSelector leaves other pods that run on every node out likewise, by label.
	// +optional
	ExcludedPodSelector *metav1.LabelSelector `json:"excludedPodSelector,omitempty"`
	// RuntimeDefault is what a RuntimeDefault container counts as: Containerd (default;
	// containerd's default profile, shipped with Berth) or Full (every syscall).
	// +kubebuilder:validation:Enum=Containerd;Full
	// +optional
	RuntimeDefault string `json:"runtimeDefault,omitempty"`
	// RuntimeDefaultProfileName names a SeccompProfile that stands for RuntimeDefault instead
	// (another runtime); it overrides RuntimeDefault.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	RuntimeDefaultProfileName string `json:"runtimeDefaultProfileName,omitempty"`
	// UnsetProfile is what a container without a profile counts as: Unconfined (default) or
	// RuntimeDefault (kubelets run with --seccomp-default).
	// +kubebuilder:validation:Enum=Unconfined;RuntimeDefault
	// +optional
	UnsetProfile string `json:"unsetProfile,omitempty"`
	// FilterNotInstalled (default true) refuses nodes where the Security Profiles Operator
	// reports a profile the pod needs as not Installed; without its node-status objects it
	// does nothing.
	// +optional
	FilterNotInstalled *bool `json:"filterNotInstalled,omitempty"`
}

// SySched's defaults (upstream's code, not its README).
const (
	DefaultProfileNamespace = "default"
	DefaultProfileName      = "all-syscalls"
)

// SetDefaults_SySchedArgs fills unset fields. A deprecated alias fills its field when that is
// unset; when both are set and differ, validation names the conflict.
func SetDefaults_SySchedArgs(obj *SySchedArgs) {
	if obj.DefaultProfileNamespace == "" {
		obj.DefaultProfileNamespace = obj.SyschedCRDNamespace
	}
	if obj.DefaultProfileName == "" {
		obj.DefaultProfileName = obj.SyschedFullCRDName
	}
	if obj.DefaultProfileNamespace == "" {
		obj.DefaultProfileNamespace = DefaultProfileNamespace
	}
	if obj.DefaultProfileName == "" {
		obj.DefaultProfileName = DefaultProfileName
	}
	if obj.DaemonSetPods == "" {
		obj.DaemonSetPods = DaemonSetPodsExclude
	}
	if obj.RuntimeDefault == "" {
		obj.RuntimeDefault = RuntimeDefaultContainerd
	}
	if obj.UnsetProfile == "" {
		obj.UnsetProfile = UnsetUnconfined
	}
}
