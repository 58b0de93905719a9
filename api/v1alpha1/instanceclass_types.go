package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The InstanceClass contract. An instance class is the value of a pod's class label
// (`ipp-class`, `berth.dev/instance-class`). Without an InstanceClass of that name, a class
// belongs to the namespace of the pod that carries it: pods of namespaces red and blue both
// labelled `ipp-class=gold` are two classes and never share a node. An InstanceClass named
// after the class value is the administrator's grant: the class is then one class shared by
// exactly the namespaces it lists, and a pod of any other namespace carrying that value is
// refused at admission. See pkg/isolation/webhook/README.md, "Classes belong to namespaces".
const (
	// ConditionGranted is True when every namespace an InstanceClass lists exists; False names
	// the missing ones (the grant still holds for them once they are created).
	ConditionGranted = "Granted"
)

// InstanceClass shares one instance class between the namespaces it lists. Only cluster
// administrators should be able to write it (the chart grants it to no tenant role); the
// operator writes its status.
//
// Why a list of namespaces and not a label selector (as PodNetwork's grant): the grant decides
// which tenants may sit on each other's nodes, so it names them; a selector would let whoever
// can label a namespace join a class, and the negation of a list is what the `ipp` mode's
// anti-affinity term (`namespaceSelector: kubernetes.io/metadata.name NotIn [...]`) and the
// admission policies can express exactly.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=iclass,categories=berth
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name="Granted",type=string,JSONPath=`.status.conditions[?(@.type=="Granted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name is the class label's value: at most 63 characters"
type InstanceClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec InstanceClassSpec `json:"spec"`
	// +optional
	Status InstanceClassStatus `json:"status,omitempty"`
}

// InstanceClassSpec is the grant of one class.
type InstanceClassSpec struct {
	// Namespaces whose pods may carry this class; they share its nodes. A pod of any other
	// namespace labelled with this class is refused at admission, naming this InstanceClass.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	Namespaces []string `json:"namespaces"`
}

// InstanceClassStatus is written by the operator alone.
type InstanceClassStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Granted.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// InstanceClassList is a list of InstanceClasses.
type InstanceClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InstanceClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &InstanceClass{}, &InstanceClassList{})
		return nil
	})
}
