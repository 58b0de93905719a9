package podnet

import (
	"context"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// DynamicStatus applies entries to the status subresource with the dynamic client, as field
// manager berth-agent/<node>, forced (the node's entries are the agent's to state).
type DynamicStatus struct {
	Client   dynamic.Interface
	NodeName string
}

// Apply implements StatusApplier.
func (d DynamicStatus) Apply(ctx context.Context, namespace, name string, entries []berthv1alpha1.PodAttachmentStatus) error {
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].Pod != entries[j].Pod {
			return entries[i].Pod < entries[j].Pod
		}
		return entries[i].Attachment < entries[j].Attachment
	})
	list := make([]any, 0, len(entries))
	for i := range entries {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&entries[i])
		if err != nil {
			return err
		}
		list = append(list, m)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": berthv1alpha1.GroupVersion.String(), "kind": "PodConfig",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"status":   map[string]any{"pods": list},
	}}
	_, err := d.Client.Resource(PodConfigGVR).Namespace(namespace).ApplyStatus(ctx, name, u, metav1.ApplyOptions{
		FieldManager: berthv1alpha1.PodConfigAgentFieldManagerPrefix + d.NodeName, Force: true})
	return err
}
