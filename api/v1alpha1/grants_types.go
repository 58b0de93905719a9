package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The Grants contract. PodNetworks and InstanceClasses are cluster-scoped and only
// administrators read them, so a tenant could not tell which networks its PodConfigs may name
// or which shared classes its pods may carry. The operator writes, in every namespace that is
// granted something, one Grants object named GrantsName: what the PodNetworks and
// InstanceClasses grant that namespace, and nothing about any other namespace. The chart folds
// read access to it into the built-in view, edit and admin roles; no tenant role may write it.
const (
	// GrantsName is the name of the one Grants object of a namespace.
	GrantsName = "grants"
	// GrantsFieldManager is the operator's identity on Grants and InstanceClass status.
	GrantsFieldManager = "berth-operator-grants"
	// ConditionComplete is True when the Grants object lists everything granted to its
	// namespace; False says what is missing (the operator runs without the PodConfig
	// controller, so no network is decided, or a list was cut at its bound).
	ConditionComplete = "Complete"
	// OwnClassesStatement is what Grants says about classes no InstanceClass names.
	OwnClassesStatement = "a class value that no InstanceClass names is this namespace's own: its pods share nodes with no other namespace's; " +
		"a class value named by an InstanceClass that is not listed here is refused at admission"
)

// Network states in a Grants object.
const (
	// GrantedNetworkAccepted: the operator accepted the network; PodConfigs may attach to it.
	GrantedNetworkAccepted = "Accepted"
	// GrantedNetworkRefused: the operator refused the network (its administrator must fix it);
	// PodConfigs naming it attach nothing.
	GrantedNetworkRefused = "Refused"
	// GrantedNetworkPending: the operator has not decided the network's current spec yet.
	GrantedNetworkPending = "Pending"
	// GrantedNetworkDeleting: the network is being deleted; attachments on it are removed.
	GrantedNetworkDeleting = "Deleting"
)

// MaxGrantedItems bounds each list of a Grants object (a cut list says so in Complete).
const MaxGrantedItems = 256

// Grants is the operator's read-only view, in one namespace, of what administrators granted
// it: the PodNetworks whose namespaceSelector selects it and the InstanceClasses that list it.
// It exists only in namespaces granted something, always named "grants"; the operator is its
// only writer (create, status, delete).
//
// Why a namespaced object and not read access to PodNetworks and InstanceClasses: RBAC cannot
// narrow a list of cluster-scoped objects to those that select the caller's namespace, and
// every PodNetwork names another tenant's range and selector, every InstanceClass other tenants'
// namespaces.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,path=grants,singular=grants,categories=berth
// +kubebuilder:printcolumn:name="Networks",type=string,JSONPath=`.status.networks[*].name`
// +kubebuilder:printcolumn:name="Classes",type=string,JSONPath=`.status.instanceClasses[*].name`
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'grants'",message="metadata.name must be grants: a namespace has one Grants object, written by the operator"
type Grants struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Status GrantsStatus `json:"status,omitempty"`
}

// GrantsStatus is written by the operator alone.
type GrantsStatus struct {
	// Networks are the PodNetworks whose namespaceSelector selects this namespace, by name.
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	// +optional
	Networks []GrantedNetwork `json:"networks,omitempty"`
	// InstanceClasses are the InstanceClasses that list this namespace, by name.
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	// +optional
	InstanceClasses []GrantedInstanceClass `json:"instanceClasses,omitempty"`
	// OwnClasses says what a class value without an InstanceClass means for this namespace.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	OwnClasses string `json:"ownClasses,omitempty"`
	// Conditions: Complete.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GrantedNetwork is what a tenant needs of one granted PodNetwork to write a PodConfig for it.
type GrantedNetwork struct {
	// Name of the PodNetwork (what a PodConfig names).
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// CIDR of the network.
	// +kubebuilder:validation:MaxLength=64
	CIDR string `json:"cidr"`
	// Gateway on every node's bridge, never given to a pod (empty: layer 2 only).
	// +kubebuilder:validation:MaxLength=45
	// +optional
	Gateway string `json:"gateway,omitempty"`
	// MTU of the pods' interfaces (empty: the kernel's default).
	// +optional
	MTU *int32 `json:"mtu,omitempty"`
	// Routes every attached pod gets through this network.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Routes []GrantedRoute `json:"routes,omitempty"`
	// State: Accepted, Refused, Pending or Deleting. Only an Accepted network attaches pods;
	// the refusal's reason is on the PodNetwork, for its administrator.
	// +kubebuilder:validation:Enum=Accepted;Refused;Pending;Deleting
	State string `json:"state"`
}

// GrantedRoute is a route of a granted network.
type GrantedRoute struct {
	// +kubebuilder:validation:MaxLength=64
	Destination string `json:"destination"`
	// +kubebuilder:validation:MaxLength=45
	// +optional
	Via string `json:"via,omitempty"`
}

// GrantedInstanceClass is one shared instance class granted to this namespace.
type GrantedInstanceClass struct {
	// Name of the InstanceClass: the class label's value pods of this namespace may carry.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// SharedWith is how many other namespaces the class is granted to: their pods share the
	// class's nodes with this namespace's. Which namespaces they are is not shown (they are
	// other tenants); the InstanceClass's administrator knows.
	SharedWith int32 `json:"sharedWith"`
}

// +kubebuilder:object:root=true

// GrantsList is a list of Grants.
type GrantsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Grants `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Grants{}, &GrantsList{})
		return nil
	})
}
