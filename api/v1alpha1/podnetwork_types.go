package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The PodNetwork contract. A PodNetwork is the cluster administrator's grant: a network (the
// host bridge Berth creates and owns on each node, an address range, gateway, MTU, VLAN and
// routes) and the namespaces whose PodConfigs may attach pods to it. Tenants name a network;
// they never name bridges, ranges or gateways. See pkg/podconfig/README.md.
const (
	// PodNetworkFinalizer holds a PodNetwork until no address of it is allocated (every
	// attachment on it was removed by the agents, or its pod is gone).
	PodNetworkFinalizer = "berth.dev/podnetwork"
	// ConditionAccepted is True when the operator accepted the network's spec; False names the
	// field and the rule that refused it, and such a network binds no PodConfig.
	ConditionAccepted = "Accepted"
)

// PodNetwork is a network cluster administrators grant to namespaces: PodConfigs of a granted
// namespace attach their pods to it by name. Only cluster administrators should be able to
// write it (the chart grants it to no tenant role); the operator writes its status.
//
// The CEL rules refuse, at admission, ranges no pod network may use (loopback, link-local
// including the cloud metadata address 169.254.169.254, multicast, unspecified and default
// routes); the operator refuses, in status, what needs the cluster's knowledge (the pod and
// service CIDRs, the configured node networks, conflicts with older networks), and every node
// agent checks all of it again before it touches a link.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pnet,categories=berth
// +kubebuilder:printcolumn:name="Bridge",type=string,JSONPath=`.spec.bridge`
// +kubebuilder:printcolumn:name="CIDR",type=string,JSONPath=`.spec.cidr`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.used`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PodNetworkSpec `json:"spec"`
	// +optional
	Status PodNetworkStatus `json:"status,omitempty"`
}

// PodNetworkSpec is one network and its grant.
// +kubebuilder:validation:XValidation:rule="self.bridge == oldSelf.bridge && self.cidr == oldSelf.cidr && (has(self.gateway) == has(oldSelf.gateway)) && (!has(self.gateway) || self.gateway == oldSelf.gateway) && (has(self.vlan) == has(oldSelf.vlan)) && (!has(self.vlan) || self.vlan == oldSelf.vlan) && (has(self.vxlan) == has(oldSelf.vxlan)) && (!has(self.vxlan) || self.vxlan == oldSelf.vxlan)",message="bridge, cidr, gateway, vlan and vxlan are immutable (links and addresses exist on nodes); create another PodNetwork"
// +kubebuilder:validation:XValidation:rule="!(has(self.vlan) && has(self.vxlan))",message="a network carries a VLAN or a VXLAN, not both",fieldPath=".vxlan"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !isCIDR(self.cidr) || !isIP(self.gateway) || cidr(self.cidr).containsIP(self.gateway)",message="gateway must be inside cidr",fieldPath=".gateway"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !isCIDR(self.cidr) || self.gateway != self.cidr.split('/')[0]",message="gateway cannot be the network address",fieldPath=".gateway"
// +kubebuilder:validation:XValidation:rule="!has(self.routes) || !isCIDR(self.cidr) || self.routes.all(r, !isCIDR(r.destination) || cidr(r.destination).ip().family() == cidr(self.cidr).ip().family())",message="route destinations must be of the cidr's address family",fieldPath=".routes"
// +kubebuilder:validation:XValidation:rule="!has(self.routes) || !isCIDR(self.cidr) || self.routes.all(r, !has(r.via) || !isIP(r.via) || cidr(self.cidr).containsIP(r.via))",message="a route's via must be inside cidr (directly reachable)",fieldPath=".routes"
type PodNetworkSpec struct {
	// Bridge is the host bridge of the network on every node. Berth creates it (marked as
	// its own) and removes it when no attachment uses it; a link of that name that Berth did
	// not create is never joined or changed (the attachment fails, naming it). It must start
	// with the operator's bridge prefix (default "berth").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]{0,14}$`
	Bridge string `json:"bridge"`

	// CIDR of the network, canonical (no host bits), IPv4 or IPv6. Never loopback,
	// link-local, multicast, unspecified or a default route, and never overlapping the
	// cluster's pod or service ranges or the node networks.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 192.168.100.0/24 or fd00:1::/64"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self) == cidr(self).masked()",message="must be the network address (no host bits set)"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).prefixLength() >= 8",message="a pod network is at most a /8 (a default route or half the address space is never a pod network)"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || !(cidr('127.0.0.0/8').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('127.0.0.0/8')) || cidr('::1/128').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('::1/128')))",message="overlaps loopback (127.0.0.0/8, ::1/128)"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || !(cidr('169.254.0.0/16').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('169.254.0.0/16')) || cidr('fe80::/10').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('fe80::/10')))",message="overlaps link-local (169.254.0.0/16 with the cloud metadata address 169.254.169.254, fe80::/10)"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || !(cidr('224.0.0.0/4').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('224.0.0.0/4')) || cidr('ff00::/8').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('ff00::/8')))",message="overlaps multicast (224.0.0.0/4, ff00::/8)"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || !(cidr('0.0.0.0/8').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('0.0.0.0/8')) || cidr('240.0.0.0/4').containsCIDR(cidr(self)) || cidr(self).containsCIDR(cidr('240.0.0.0/4')) || cidr('::/128').containsCIDR(cidr(self)))",message="overlaps unspecified or reserved addresses (0.0.0.0/8, 240.0.0.0/4, ::)"
	CIDR string `json:"cidr"`

	// Gateway is an address inside cidr set on the bridge of every node and never given to a
	// pod. Without it the network is layer 2 only.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IP address"
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// MTU of the pods' interfaces (and their host ends).
	// +kubebuilder:validation:Minimum=68
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MTU *int32 `json:"mtu,omitempty"`

	// VLAN puts the host interface's VLAN on the bridge, so pods reach that VLAN. The parent
	// must be in the operator's allowed parents.
	// +optional
	VLAN *PodNetworkVLAN `json:"vlan,omitempty"`

	// VXLAN joins the network's bridges on every node into one layer-2 segment through a
	// VXLAN of a host interface (its address is the tunnel's local end), found by multicast:
	// the nodes' uplinks must carry the group. Set mtu to the uplink's MTU minus 50 (the
	// VXLAN header). The parent must be in the operator's allowed parents.
	// +optional
	VXLAN *PodNetworkVXLAN `json:"vxlan,omitempty"`

	// Routes every attached pod gets through this network. Never a default route, and never
	// to loopback, link-local, multicast or the cluster's own ranges.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Routes []Route `json:"routes,omitempty"`

	// NamespaceSelector selects the namespaces whose PodConfigs may attach to this network.
	// Required: {} grants every namespace, and must be written out. Two namespaces share the
	// network only if it selects both.
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`
}

// PodNetworkVLAN is a VLAN of a host interface.
type PodNetworkVLAN struct {
	// ID of the VLAN.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	ID int32 `json:"id"`
	// Parent is the host interface that carries the VLAN.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$`
	Parent string `json:"parent"`
}

// PodNetworkVXLAN is a VXLAN segment over a host interface, its peers found by multicast.
type PodNetworkVXLAN struct {
	// VNI is the VXLAN network identifier.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777215
	VNI int32 `json:"vni"`
	// Parent is the host interface the VXLAN's packets leave and arrive through.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$`
	Parent string `json:"parent"`
	// Group is the IPv4 multicast group the nodes' VXLAN ends join to find each other.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 4 && cidr('224.0.0.0/4').containsIP(self) && !cidr('224.0.0.0/24').containsIP(self)",message="must be an IPv4 multicast group outside 224.0.0.0/24 (link-local control), e.g. 239.1.1.1"
	Group string `json:"group"`
	// Port is the UDP port of the VXLAN (default 4789, IANA's).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=4789
	// +optional
	Port int32 `json:"port,omitempty"`
}

// PodNetworkStatus is written by the operator alone.
type PodNetworkStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Accepted (False names each refused field and rule), Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Used is the number of addresses allocated on this network.
	// +optional
	Used int64 `json:"used,omitempty"`
}

// +kubebuilder:object:root=true

// PodNetworkList is a list of PodNetworks.
type PodNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodNetwork `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &PodNetwork{}, &PodNetworkList{})
		return nil
	})
}
