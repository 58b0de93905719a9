package framework

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/berth-sched/berth/api/crds"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
)

// InstanceClassGVR is the InstanceClass resource (cluster-scoped).
var InstanceClassGVR = berthv1alpha1.GroupVersion.WithResource("instanceclasses")

// InstallInstanceClassCRD installs the generated InstanceClass CRD unless it exists, and waits
// until the API serves it.
func InstallInstanceClassCRD(ctx context.Context, cfg *rest.Config) error {
	crd, err := crds.Load("berth.dev_instanceclasses.yaml")
	if err != nil {
		return err
	}
	return cluster.InstallCRDs(ctx, cfg, crd)
}

// CreateInstanceClass installs the InstanceClass CRD if needed and creates the InstanceClass
// name sharing its class among namespaces, deleted when the test ends.
func CreateInstanceClass(ctx context.Context, t testing.TB, cfg *rest.Config, name string, namespaces ...string) {
	t.Helper()
	remove, err := ApplyInstanceClass(ctx, cfg, name, namespaces...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
}

// ApplyInstanceClass installs the InstanceClass CRD if needed and creates the InstanceClass
// name sharing its class among namespaces; remove deletes it.
func ApplyInstanceClass(ctx context.Context, cfg *rest.Config, name string, namespaces ...string) (remove func(), err error) {
	if err := InstallInstanceClassCRD(ctx, cfg); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ic := &berthv1alpha1.InstanceClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: berthv1alpha1.GroupVersion.String(), Kind: "InstanceClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       berthv1alpha1.InstanceClassSpec{Namespaces: namespaces},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ic)
	if err != nil {
		return nil, err
	}
	api := dyn.Resource(InstanceClassGVR)
	if _, err := api.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("InstanceClass %s: %w", name, err)
	}
	return func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) }, nil
}
