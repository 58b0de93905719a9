package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// removeIsolationMarkers takes the autoscaler marker (pkg/isolation/marker) off every node that
// carries it, once the operator, its only writer, is stopped: an uninstalled Berth must leave
// no label behind that an autoscaler's NodePool or a later install would read as a class. A
// JSON merge patch of that one label (the hook's RBAC: list and patch on nodes).
func removeIsolationMarkers(ctx context.Context, c client.Client) (int, error) {
	req, err := labels.NewRequirement(classmarker.Key, selection.Exists, nil)
	if err != nil {
		return 0, err
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}); err != nil {
		return 0, fmt.Errorf("listing nodes with %s: %w", classmarker.Key, err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+classmarker.Key+`":null}}}`))
	for i := range list.Items {
		n := &list.Items[i]
		n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
		if err := c.Patch(ctx, n, patch); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("removing %s from node %s: %w", classmarker.Key, n.Name, err)
		}
	}
	return len(list.Items), nil
}
