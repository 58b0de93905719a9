package framework

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"github.com/berth-sched/berth/api/crds"
	"github.com/berth-sched/berth/e2e/cluster"
)

// InstallSecondarySchedulerCRD installs the SecondaryScheduler CRD the chart ships and waits
// until it is served.
func InstallSecondarySchedulerCRD(ctx context.Context, rc *rest.Config) error {
	crd, err := crds.SecondaryScheduler()
	if err != nil {
		return err
	}
	return cluster.InstallCRDs(ctx, rc, crd)
}

// DropSchemaProperty removes every property named name from s, at any depth.
func DropSchemaProperty(s *apiextensionsv1.JSONSchemaProps, name string) {
	if s == nil {
		return
	}
	delete(s.Properties, name)
	for k, p := range s.Properties {
		DropSchemaProperty(&p, name)
		s.Properties[k] = p
	}
	if s.Items != nil {
		DropSchemaProperty(s.Items.Schema, name)
	}
	if s.AdditionalProperties != nil {
		DropSchemaProperty(s.AdditionalProperties.Schema, name)
	}
}

// HasSchemaProperty says whether s has a property named name at any depth.
func HasSchemaProperty(s *apiextensionsv1.JSONSchemaProps, name string) bool {
	if s == nil {
		return false
	}
	if _, ok := s.Properties[name]; ok {
		return true
	}
	for _, p := range s.Properties {
		if HasSchemaProperty(&p, name) {
			return true
		}
	}
	return (s.Items != nil && HasSchemaProperty(s.Items.Schema, name)) ||
		(s.AdditionalProperties != nil && HasSchemaProperty(s.AdditionalProperties.Schema, name))
}
