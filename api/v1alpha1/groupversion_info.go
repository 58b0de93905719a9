// Package v1alpha1 is Berth's operator API: the SecondaryScheduler resource from which the
// operator renders, validates and runs a berth-scheduler Deployment.
// +kubebuilder:object:generate=true
// +groupName=berth.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of this package.
var GroupVersion = schema.GroupVersion{Group: "berth.dev", Version: "v1alpha1"}

var (
	// SchemeBuilder registers this package's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &SecondaryScheduler{}, &SecondarySchedulerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
