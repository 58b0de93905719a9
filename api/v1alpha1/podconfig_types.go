package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The PodConfig contract shared by the operator (IPAM, status phase/conditions) and the node
// agent (links inside pods). See pkg/podconfig/README.md.
const (
	// PodConfigFinalizer holds a PodConfig until every node agent has removed its links (or
	// the pods are gone, or their node is dead for the removal timeout).
	PodConfigFinalizer = "berth.dev/podconfig"
	// PodConfigLabel selects pods when spec.podSelector is nil: pods labelled
	// podconfig=<PodConfig name> in the PodConfig's namespace.
	PodConfigLabel = "podconfig"
	// PodConfigOperatorFieldManager is the operator's field manager on PodConfig status.
	PodConfigOperatorFieldManager = "berth-operator"
	// PodConfigAgentFieldManagerPrefix + <node name> is the field manager with which the agent
	// of that node server-side-applies its status.pods entries.
	PodConfigAgentFieldManagerPrefix = "berth-agent/"
)

// PodConfigPhase summarises a PodConfig.
// +kubebuilder:validation:Enum=Pending;Configuring;Configured;Failed
type PodConfigPhase string

// Phases.
const (
	// PodConfigPending: accepted, no selected pod scheduled yet.
	PodConfigPending PodConfigPhase = "Pending"
	// PodConfigConfiguring: some selected pods are not configured yet.
	PodConfigConfiguring PodConfigPhase = "Configuring"
	// PodConfigConfigured: every attachment of every selected pod is configured.
	PodConfigConfigured PodConfigPhase = "Configured"
	// PodConfigFailed: the spec is refused (Degraded names the field) or some attachment failed.
	PodConfigFailed PodConfigPhase = "Failed"
)

// AttachmentState is the state of one attachment of one pod.
// +kubebuilder:validation:Enum=Pending;Allocated;Configured;Failed;Removing;Removed
type AttachmentState string

// Attachment states. The operator writes Pending, Allocated, Failed (allocation failures, no
// address) and Removing; the node agent writes Configured, Failed (with an address: the link
// could not be made) and Removed.
const (
	AttachmentPending    AttachmentState = "Pending"
	AttachmentAllocated  AttachmentState = "Allocated"
	AttachmentConfigured AttachmentState = "Configured"
	AttachmentFailed     AttachmentState = "Failed"
	AttachmentRemoving   AttachmentState = "Removing"
	AttachmentRemoved    AttachmentState = "Removed"
)

// PodConfig condition types (plus ConditionDegraded from the SecondaryScheduler API).
const (
	ConditionReady = "Ready"
)

// PodConfig gives the pods it selects, in its own namespace, extra network interfaces at run
// time: the operator allocates their addresses (IPAllocation) and the node agent of each pod's
// node creates the links, so the pods themselves need no privileges.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pcfg,categories=berth
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.podCount`
// +kubebuilder:printcolumn:name="Configured",type=integer,JSONPath=`.status.configuredCount`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PodConfigSpec `json:"spec"`
	// +optional
	Status PodConfigStatus `json:"status,omitempty"`
}

// PodConfigSpec is the desired configuration.
type PodConfigSpec struct {
	// PodSelector selects pods in this PodConfig's namespace (never another: a PodConfig has
	// no namespace selector). Nil selects pods labelled podconfig=<this PodConfig's name>; an
	// empty selector selects every pod of the namespace.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// NetworkAttachments are the interfaces every selected pod gets, each on a PodNetwork
	// that grants this namespace.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.network == a.network))",message="two attachments of one PodConfig cannot join the same network"
	NetworkAttachments []NetworkAttachment `json:"networkAttachments"`
}

// NetworkAttachment is one extra interface in each selected pod, on a network the cluster
// administrator granted (a PodNetwork whose namespaceSelector selects this namespace). The
// bridge, range, gateway, MTU, VLAN and routes are the network's: a tenant names nothing on
// the node.
type NetworkAttachment struct {
	// Name of the interface inside the pod (at most 15 characters, the kernel's limit;
	// eth0 and lo are the pod's own).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]{0,14}$`
	// +kubebuilder:validation:XValidation:rule="self != 'eth0' && self != 'lo'",message="eth0 and lo are reserved"
	Name string `json:"name"`

	// Network is the name of the PodNetwork to attach to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Network string `json:"network"`
}

// Route is a route inside the pod through the attachment.
type Route struct {
	// Destination CIDR: never a default route, loopback, link-local or multicast.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).prefixLength() >= 8",message="default routes (and anything wider than a /8) are never routed through an attachment: the pod's own network carries them"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || !(cidr('127.0.0.0/8').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('127.0.0.0/8')) || cidr('::1/128').containsCIDR(cidr(self)) || cidr('169.254.0.0/16').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('169.254.0.0/16')) || cidr('fe80::/10').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('fe80::/10')) || cidr('224.0.0.0/4').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('224.0.0.0/4')) || cidr('ff00::/8').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('ff00::/8')))",message="loopback, link-local (169.254.169.254, the cloud metadata address, included) and multicast are never routed through an attachment"
	Destination string `json:"destination"`
	// Via is the next hop inside the network's cidr (default: the gateway; without a
	// gateway, the destination is on-link).
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IP address"
	// +optional
	Via string `json:"via,omitempty"`
}

// PodConfigStatus is written by two parties: the operator owns observedGeneration, phase,
// conditions and the counts (and removes entries of pods that are gone); each node agent
// server-side-applies (field manager berth-agent/<node>) the status.pods entries of pods on
// its node. The list-map keys (pod, attachment) let each node own its own entries.
type PodConfigStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase: Pending, Configuring, Configured or Failed.
	// +optional
	Phase PodConfigPhase `json:"phase,omitempty"`
	// PodCount is the number of selected pods scheduled to a node.
	// +optional
	PodCount int32 `json:"podCount,omitempty"`
	// ConfiguredCount is the number of selected pods whose attachments are all configured.
	// +optional
	ConfiguredCount int32 `json:"configuredCount,omitempty"`
	// Conditions: Ready (every attachment of every selected pod configured), Degraded (spec
	// refused, naming the field; allocation failures; removal stuck on a dead node).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Pods has one entry per selected pod and attachment.
	// +listType=map
	// +listMapKey=pod
	// +listMapKey=attachment
	// +optional
	Pods []PodAttachmentStatus `json:"pods,omitempty"`
}

// PodAttachmentStatus is the state of one attachment of one pod.
type PodAttachmentStatus struct {
	// Pod name (in the PodConfig's namespace).
	Pod string `json:"pod"`
	// Attachment name (spec.networkAttachments[].name).
	Attachment string `json:"attachment"`
	// PodUID of the pod the entry is about (a re-created pod with the same name is another).
	// +optional
	PodUID string `json:"podUID,omitempty"`
	// Node the pod runs on.
	// +optional
	Node string `json:"node,omitempty"`
	// Network (PodNetwork) of the attachment.
	// +optional
	Network string `json:"network,omitempty"`
	// Interface name inside the pod.
	// +optional
	Interface string `json:"interface,omitempty"`
	// Address in CIDR form (e.g. 192.168.100.2/24), from the network's IPAllocation.
	// +optional
	Address string `json:"address,omitempty"`
	// HostPeer is the host end of the veth.
	// +optional
	HostPeer string `json:"hostPeer,omitempty"`
	// Bridge the host end is enslaved to.
	// +optional
	Bridge string `json:"bridge,omitempty"`
	// State: Pending, Allocated, Configured, Failed, Removing, Removed.
	// +optional
	State AttachmentState `json:"state,omitempty"`
	// LastError says why the state is Failed (or why removal is stuck).
	// +optional
	LastError string `json:"lastError,omitempty"`
	// LastTransitionTime of State.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// +kubebuilder:object:root=true

// PodConfigList is a list of PodConfigs.
type PodConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &PodConfig{}, &PodConfigList{}, &IPAllocation{}, &IPAllocationList{})
		return nil
	})
}
