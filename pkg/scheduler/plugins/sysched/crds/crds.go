// Package crds embeds Berth-written CustomResourceDefinitions for the subset of the Security
// Profiles Operator API that SySched reads, for clusters where SPO is not installed.
package crds

import (
	"context"
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var (
	//go:embed seccompprofiles-cluster.yaml
	seccompCluster []byte
	//go:embed seccompprofiles-namespaced.yaml
	seccompNamespaced []byte
	//go:embed profilebindings.yaml
	profileBindings []byte
)

// CRDs returns the default set: cluster-scoped SeccompProfile (the shape of SPO >= v0.9) and
// ProfileBinding. Each element is one YAML document; callers get copies.
func CRDs() [][]byte {
	return [][]byte{clone(seccompCluster), clone(profileBindings)}
}

// NamespacedCRDs returns the legacy set: namespaced SeccompProfile (SPO <= v0.8) and
// ProfileBinding. It shares the CRD name with CRDs(), so install one set or the other.
func NamespacedCRDs() [][]byte {
	return [][]byte{clone(seccompNamespaced), clone(profileBindings)}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// Decode parses one embedded document.
func Decode(doc []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(doc, crd); err != nil {
		return nil, err
	}
	if crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
		return nil, fmt.Errorf("not a CustomResourceDefinition: kind %q name %q", crd.Kind, crd.Name)
	}
	return crd, nil
}

// InstallIfAbsent creates each CRD (default: CRDs()) whose name does not exist yet and leaves
// existing ones, SPO's own in particular, untouched. It returns the names it created.
func InstallIfAbsent(ctx context.Context, c apiextensionsclient.Interface, docs ...[]byte) ([]string, error) {
	if len(docs) == 0 {
		docs = CRDs()
	}
	api := c.ApiextensionsV1().CustomResourceDefinitions()
	var created []string
	for _, doc := range docs {
		crd, err := Decode(doc)
		if err != nil {
			return created, err
		}
		_, err = api.Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			continue
		case !apierrors.IsNotFound(err):
			return created, fmt.Errorf("looking up CRD %s: %w", crd.Name, err)
		}
		if _, err := api.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // installed concurrently, e.g. by SPO
			}
			return created, fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		created = append(created, crd.Name)
	}
	return created, nil
}
