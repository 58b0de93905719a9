package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// ReadYAMLDocs reads every document of a multi-document YAML file (the examples).
func ReadYAMLDocs(path string) ([]map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// CreateUnstructured creates obj through the dynamic client (namespaced if it has a
// namespace); an object that already exists is left as it is.
func CreateUnstructured(ctx context.Context, dyn dynamic.Interface, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	ri := dyn.Resource(gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s"))
	var err error
	if ns := obj.GetNamespace(); ns != "" {
		_, err = ri.Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	} else {
		_, err = ri.Create(ctx, obj, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return nil
}
