package crds

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

func toInternal(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	t.Helper()
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCRDsAreValid runs the API server's own CRD validation, so a CRD that the cluster would
// reject (bad schema, structural errors, wrong version flags) fails here.
func TestCRDsAreValid(t *testing.T) {
	for _, set := range [][][]byte{CRDs(), NamespacedCRDs()} {
		for _, doc := range set {
			crd, err := Decode(doc)
			if err != nil {
				t.Fatal(err)
			}
			in := toInternal(t, crd)
			// The API server records the storage version on create; validation expects it.
			for _, v := range crd.Spec.Versions {
				if v.Storage {
					in.Status.StoredVersions = []string{v.Name}
				}
			}
			if errs := validation.ValidateCustomResourceDefinition(context.Background(), in); len(errs) > 0 {
				t.Errorf("%s: %v", crd.Name, errs.ToAggregate())
			}
		}
	}
	c, _ := Decode(CRDs()[0])
	n, _ := Decode(NamespacedCRDs()[0])
	if c.Spec.Scope != apiextensionsv1.ClusterScoped || n.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Fatalf("scopes %s / %s", c.Spec.Scope, n.Spec.Scope)
	}
}

// TestExamplesMatchSchema validates the shipped examples, and known-bad objects, against the
// CRD schemas.
func TestExamplesMatchSchema(t *testing.T) {
	validators := map[string]apivalidation.SchemaValidator{}
	for _, doc := range CRDs() {
		crd, _ := Decode(doc)
		for _, v := range crd.Spec.Versions {
			props := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, props, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := schema.NewStructural(props); err != nil {
				t.Fatal(err)
			}
			sv, _, err := apivalidation.NewSchemaValidator(props)
			if err != nil {
				t.Fatal(err)
			}
			validators[crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind] = sv
		}
	}
	check := func(obj map[string]interface{}) field.ErrorList {
		sv := validators[obj["apiVersion"].(string)+"/"+obj["kind"].(string)]
		if sv == nil {
			t.Fatalf("no schema for %v %v", obj["apiVersion"], obj["kind"])
		}
		return apivalidation.ValidateCustomResource(nil, obj, sv)
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "..", "examples", "sysched", "*.yaml"))
	checked := 0
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := map[string]interface{}{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatal(err)
			}
			if v, _ := obj["apiVersion"].(string); !strings.HasPrefix(v, "security-profiles-operator") {
				continue
			}
			if errs := check(obj); len(errs) > 0 {
				t.Errorf("%s: %v", f, errs.ToAggregate())
			}
			checked++
		}
	}
	if checked < 7 {
		t.Fatalf("only %d SPO examples checked", checked)
	}
	bad := map[string]interface{}{"apiVersion": "security-profiles-operator.x-k8s.io/v1", "kind": "SeccompProfile",
		"spec": map[string]interface{}{"defaultAction": "SCMP_ACT_MAYBE",
			"syscalls": []interface{}{map[string]interface{}{"action": "SCMP_ACT_ALLOW", "names": []interface{}{}}}}}
	if errs := check(bad); len(errs) < 2 {
		t.Fatalf("bad profile accepted: %v", errs)
	}
}

func TestInstallIfAbsent(t *testing.T) {
	ctx := context.Background()
	existing, _ := Decode(CRDs()[0])
	existing.Labels = map[string]string{"owner": "spo"}
	c := fake.NewClientset(existing)
	created, err := InstallIfAbsent(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 1 || created[0] != "profilebindings.security-profiles-operator.x-k8s.io" {
		t.Fatalf("created %v, want only profilebindings", created)
	}
	got, _ := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, existing.Name, metav1.GetOptions{})
	if got.Labels["owner"] != "spo" {
		t.Fatal("existing CRD was modified")
	}
	if again, err := InstallIfAbsent(ctx, c); err != nil || len(again) != 0 {
		t.Fatalf("second install: %v %v", again, err)
	}
	if _, err := InstallIfAbsent(ctx, c, []byte("kind: ConfigMap\nmetadata: {name: x}\n")); err == nil {
		t.Fatal("non-CRD document accepted")
	}
}
