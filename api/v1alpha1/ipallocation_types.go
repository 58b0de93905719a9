package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPAllocation is the address pool of one PodNetwork, under the PodNetwork's name. It is
// cluster-scoped like the network, and it is the only record of which address belongs to which
// pod: the operator writes it alone, with optimistic concurrency (a resourceVersion conflict is
// re-read and retried), so no address is handed out twice across operator restarts, leader
// changes or racing replicas.
//
// There is no status subresource: the summary in status is written in the same update as the
// allocations it counts.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ipalloc,categories=berth
// +kubebuilder:printcolumn:name="Bridge",type=string,JSONPath=`.spec.master`
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.spec.cidr`
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.used`
// +kubebuilder:printcolumn:name="Free",type=string,JSONPath=`.status.free`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAllocation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAllocationSpec `json:"spec"`
	// +optional
	Status IPAllocationStatus `json:"status,omitempty"`
}

// IPAllocationSpec is the network and its allocated addresses.
// +kubebuilder:validation:XValidation:rule="self.master == oldSelf.master && self.cidr == oldSelf.cidr",message="master and cidr are immutable (they name the object)"
type IPAllocationSpec struct {
	// Master is the host bridge of the network.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Master string `json:"master"`
	// CIDR of the network (canonical form).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR"
	CIDR string `json:"cidr"`
	// Gateway reserved in this network (set on the bridge), if any.
	// +kubebuilder:validation:MaxLength=45
	// +optional
	Gateway string `json:"gateway,omitempty"`
	// Allocations, one per address in use.
	// +listType=map
	// +listMapKey=address
	// +optional
	Allocations []Allocation `json:"allocations,omitempty"`
}

// Allocation is one address given to one attachment of one pod.
type Allocation struct {
	// Address (an IP, without prefix length).
	// +kubebuilder:validation:MaxLength=45
	Address string `json:"address"`
	// PodNamespace is the namespace of the pod and of its PodConfig.
	PodNamespace string `json:"podNamespace"`
	// PodName of the pod.
	PodName string `json:"podName"`
	// PodUID identifies the pod (a re-created pod with the same name gets a new allocation).
	PodUID string `json:"podUID"`
	// PodConfig that asked for the address.
	PodConfig string `json:"podConfig"`
	// Attachment name within the PodConfig (the interface name in the pod).
	Attachment string `json:"attachment"`
	// Node the pod is scheduled to.
	// +optional
	Node string `json:"node,omitempty"`
}

// IPAllocationStatus summarises the pool.
type IPAllocationStatus struct {
	// Used is the number of allocations.
	// +optional
	Used int64 `json:"used,omitempty"`
	// Free is the number of addresses left (a decimal string: an IPv6 pool can exceed int64).
	// +optional
	Free string `json:"free,omitempty"`
}

// +kubebuilder:object:root=true

// IPAllocationList is a list of IPAllocations.
type IPAllocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAllocation `json:"items"`
}
