package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group and version of the args: kube-scheduler's own, so a
// pluginConfig entry may name them with apiVersion/kind exactly as upstream plugins' args.
var SchemeGroupVersion = schema.GroupVersion{Group: "kubescheduler.config.k8s.io", Version: "v1"}

var (
	// SchemeBuilder registers the args kinds and their defaulting functions.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs)
	// AddToScheme adds the args kinds and defaults to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&TargetLoadPackingArgs{},
		&LoadVariationRiskBalancingArgs{},
		&SySchedArgs{},
		&NodeImageLocalityArgs{},
		&InstanceIsolationArgs{},
		&DecisionRecordArgs{},
	)
	return nil
}
