package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/api/crds"
)

// CRDFieldManager owns the fields of Berth's CRDs that UpgradeCRDs applies.
const CRDFieldManager = "berth-crd-upgrade"

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// BerthCRDs are the CRDs this build generated (api/crds), as objects to apply.
func BerthCRDs() ([]*unstructured.Unstructured, error) {
	names, err := crds.Files()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, n := range names {
		data, err := crds.YAML(n)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		if u.GroupVersionKind() != crdGVK {
			return nil, fmt.Errorf("%s: a %s, not a CustomResourceDefinition", n, u.GroupVersionKind())
		}
		out = append(out, u)
	}
	return out, nil
}

// UpgradeCRDs server-side applies crds (taking over their fields from whoever set them, e.g.
// Helm's install of the chart's crds/) and waits until each is Established with its names
// accepted. Helm installs a chart's crds/ once and never upgrades them: without this, after
// `helm upgrade` the old schemas stay, and the API server silently drops every field they do not
// know from the new release's objects. The API server refuses what would lose data (a stored
// version missing from the new CRD), and that refusal is returned.
func UpgradeCRDs(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	logger := log.FromContext(ctx)
	apply := func(crd *unstructured.Unstructured, opts ...client.ApplyOption) error {
		u := crd.DeepCopy()
		delete(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		opts = append(opts, client.FieldOwner(CRDFieldManager), client.ForceOwnership)
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
			return fmt.Errorf("applying CustomResourceDefinition %s: %w", u.GetName(), err)
		}
		return nil
	}
	// why a dry run of all first: one refused CRD leaves every CRD as it was, rather than the
	// release half upgraded.
	var errs []error
	for _, crd := range crds {
		errs = append(errs, apply(crd, client.DryRunAll))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nothing applied: %w", err)
	}
	for _, crd := range crds {
		if err := apply(crd); err != nil {
			return err
		}
		logger.Info("applied", "crd", crd.GetName())
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, c, crd.GetName()); err != nil {
			return err
		}
	}
	return nil
}

// waitEstablished waits for the CRD's Established and NamesAccepted conditions.
func waitEstablished(ctx context.Context, c client.Client, name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(crdGVK)
		if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			if apierrors.IsNotFound(err) {
				last = "not found"
				return false, nil
			}
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		ok := map[string]bool{}
		last = ""
		for _, cd := range conds {
			m, _ := cd.(map[string]any)
			t, _ := m["type"].(string)
			st, _ := m["status"].(string)
			ok[t] = st == "True"
			if (t == "Established" || t == "NamesAccepted") && st != "True" {
				msg, _ := m["message"].(string)
				last = fmt.Sprintf("%s: %s", t, msg)
			}
		}
		return ok["Established"] && ok["NamesAccepted"], nil
	})
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition %s not established (%s): %w", name, last, err)
	}
	return nil
}
