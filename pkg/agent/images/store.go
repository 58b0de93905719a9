package images

import (
	"context"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// GVR is the NodeImages resource.
var GVR = schema.GroupVersionResource{Group: berthv1alpha1.GroupVersion.Group, Version: berthv1alpha1.GroupVersion.Version, Resource: "nodeimages"}

// Store reads and writes NodeImages objects.
type Store interface {
	Get(ctx context.Context, name string) (*berthv1alpha1.NodeImages, error)
	Create(ctx context.Context, obj *berthv1alpha1.NodeImages) (*berthv1alpha1.NodeImages, error)
	Update(ctx context.Context, obj *berthv1alpha1.NodeImages) (*berthv1alpha1.NodeImages, error)
	UpdateStatus(ctx context.Context, obj *berthv1alpha1.NodeImages) (*berthv1alpha1.NodeImages, error)
}

// DynamicStore is a Store on a dynamic client (the agent has no generated clientset for
// Berth's API, and a dynamic fake backs the unit tests).
type DynamicStore struct {
	Client dynamic.Interface
}

func (s DynamicStore) res() dynamic.ResourceInterface { return s.Client.Resource(GVR) }

// Get implements Store.
func (s DynamicStore) Get(ctx context.Context, name string) (*berthv1alpha1.NodeImages, error) {
	u, err := s.res().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

// Create implements Store.
func (s DynamicStore) Create(ctx context.Context, obj *berthv1alpha1.NodeImages) (*berthv1alpha1.NodeImages, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	out, err := s.res().Create(ctx, u, metav1.CreateOptions{FieldManager: berthv1alpha1.NodeImagesFieldManager})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(out)
}

// Update implements Store.
func (s DynamicStore) Update(ctx context.Context, obj *berthv1alpha1.NodeImages) (*berthv1alpha1.NodeImages, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	out, err := s.res().Update(ctx, u, metav1.UpdateOptions{FieldManager: berthv1alpha1.NodeImagesFieldManager})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(out)
}

// UpdateStatus implements Store.
func (s DynamicStore) UpdateStatus(ctx context.Context, obj *berthv1alpha1.NodeImages) (*berthv1alpha1.NodeImages, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	out, err := s.res().UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: berthv1alpha1.NodeImagesFieldManager})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(out)
}

func toUnstructured(obj *berthv1alpha1.NodeImages) (*unstructured.Unstructured, error) {
	obj = obj.DeepCopy()
	obj.APIVersion, obj.Kind = berthv1alpha1.GroupVersion.String(), "NodeImages"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func fromUnstructured(u *unstructured.Unstructured) (*berthv1alpha1.NodeImages, error) {
	obj := &berthv1alpha1.NodeImages{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, err
	}
	return obj, nil
}
