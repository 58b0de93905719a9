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

// LinkType is how an attachment reaches the host bridge.
// +kubebuilder:validation:Enum=veth;vlan
type LinkType string

// Link types.
const (
	// LinkVeth: a veth pair, one end in the pod (named after the attachment), the other on the
	// host, enslaved to the bridge spec.master.
	LinkVeth LinkType = "veth"
	// LinkVLAN: as veth, and the host's VLAN sub-interface <parent>.<vlanID> is enslaved to the
	// same bridge, so the pod reaches that VLAN.
	LinkVLAN LinkType = "vlan"
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

	// NetworkAttachments are the interfaces every selected pod gets.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.master == a.master && b.cidr == a.cidr))",message="two attachments of one PodConfig cannot join the same network (master and cidr)"
	NetworkAttachments []NetworkAttachment `json:"networkAttachments"`
}

// NetworkAttachment is one extra interface in each selected pod, on a host bridge.
// +kubebuilder:validation:XValidation:rule="self.linkType != 'vlan' || (has(self.vlanID) && has(self.parent))",message="linkType vlan needs vlanID and parent",fieldPath=".vlanID"
// +kubebuilder:validation:XValidation:rule="self.linkType == 'vlan' || (!has(self.vlanID) && !has(self.parent))",message="vlanID and parent are only valid with linkType vlan",fieldPath=".linkType"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !isCIDR(self.cidr) || !isIP(self.gateway) || cidr(self.cidr).containsIP(self.gateway)",message="gateway must be inside cidr",fieldPath=".gateway"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !isCIDR(self.cidr) || self.gateway != self.cidr.split('/')[0]",message="gateway cannot be the network address",fieldPath=".gateway"
// +kubebuilder:validation:XValidation:rule="!has(self.routes) || !isCIDR(self.cidr) || self.routes.all(r, !isCIDR(r.destination) || cidr(r.destination).ip().family() == cidr(self.cidr).ip().family())",message="route destinations must be of the cidr's address family",fieldPath=".routes"
// +kubebuilder:validation:XValidation:rule="!has(self.routes) || !isCIDR(self.cidr) || self.routes.all(r, !has(r.via) || !isIP(r.via) || cidr(self.cidr).containsIP(r.via))",message="a route's via must be inside cidr (directly reachable)",fieldPath=".routes"
type NetworkAttachment struct {
	// Name of the interface inside the pod (at most 15 characters, the kernel's limit;
	// eth0 and lo are the pod's own).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]{0,14}$`
	// +kubebuilder:validation:XValidation:rule="self != 'eth0' && self != 'lo'",message="eth0 and lo are reserved"
	Name string `json:"name"`

	// LinkType: veth (default) or vlan.
	// +kubebuilder:default=veth
	// +optional
	LinkType LinkType `json:"linkType,omitempty"`

	// Master is the host bridge the attachment joins (created by the agent if missing). It
	// must carry the operator's bridge prefix (default "berth") or be allow-listed; host
	// interfaces (eth0, lo, cni0, cbr0, ...) are refused.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$`
	Master string `json:"master"`

	// Parent is the host interface whose VLAN vlanID joins the bridge (vlan only; must be
	// allow-listed by the operator).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$`
	// +optional
	Parent string `json:"parent,omitempty"`

	// VLANID of the parent's VLAN (vlan only).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	// +optional
	VLANID *int32 `json:"vlanID,omitempty"`

	// CIDR of the network, in canonical form (no host bits), IPv4 or IPv6, any prefix length.
	// Pods sharing master and cidr share one network and one address pool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 192.168.100.0/24 or fd00:1::/64"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self) == cidr(self).masked()",message="must be the network address (no host bits set)"
	CIDR string `json:"cidr"`

	// Gateway is an address inside cidr, reserved (never given to a pod) and set on the host
	// bridge. Without it the bridge has no address and the network is layer 2 only.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IP address"
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// Routes the agent adds inside the pod through this interface.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Routes []Route `json:"routes,omitempty"`

	// MTU of the pod's interface (and the host end).
	// +kubebuilder:validation:Minimum=68
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MTU *int32 `json:"mtu,omitempty"`
}

// Route is a route inside the pod through the attachment.
type Route struct {
	// Destination CIDR.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR"
	Destination string `json:"destination"`
	// Via is the next hop inside the attachment's cidr (default: the gateway; without a
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
