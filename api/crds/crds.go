// Package crds embeds the CustomResourceDefinitions generated from Berth's API (hack/generate.sh),
// so tests, the operator and the chart install exactly what controller-gen produced.
package crds

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// SecondarySchedulerFile is the generated CRD's file name.
const SecondarySchedulerFile = "berth.dev_secondaryschedulers.yaml"

// PodConfig and IPAllocation CRD file names (PodConfig network attachments).
const (
	PodConfigFile    = "berth.dev_podconfigs.yaml"
	IPAllocationFile = "berth.dev_ipallocations.yaml"
	PodNetworkFile   = "berth.dev_podnetworks.yaml"
)

// NodeImagesFile is the NodeImages CRD's file name (image inventory published by the node agent).
const NodeImagesFile = "berth.dev_nodeimages.yaml"

// Load returns a generated CRD by file name.
func Load(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return crd, nil
}

// Files are the generated CRD files' names, sorted.
func Files() ([]string, error) { return fs.Glob(files, "*.yaml") }

// YAML returns a generated CRD file.
func YAML(name string) ([]byte, error) { return files.ReadFile(name) }

// SecondaryScheduler returns the SecondaryScheduler CRD.
func SecondaryScheduler() (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := files.ReadFile(SecondarySchedulerFile)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", SecondarySchedulerFile, err)
	}
	return crd, nil
}
