package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// Setup checks the policy and that the API serves PodConfigs, PodNetworks and IPAllocations,
// then registers both controllers with mgr.
func Setup(mgr ctrl.Manager, policy podconfig.Policy, removalTimeout time.Duration) error {
	if err := policy.Check(); err != nil {
		return fmt.Errorf("podconfig policy: %w", err)
	}
	for _, kind := range []string{"PodConfig", "PodNetwork", "IPAllocation"} {
		gvk := berthv1alpha1.GroupVersion.WithKind(kind)
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return fmt.Errorf("the API server does not serve %s (install the chart's CRDs, charts/berth/crds): %w", gvk, err)
		}
	}
	nets := &NetworkReconciler{
		Client:    client.WithFieldOwner(mgr.GetClient(), berthv1alpha1.PodConfigOperatorFieldManager),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(berthv1alpha1.PodConfigOperatorFieldManager),
		Policy:    policy,
	}
	if err := nets.SetupWithManager(mgr); err != nil {
		return err
	}
	return New(mgr, removalTimeout).SetupWithManager(mgr)
}

// CacheOptions trims cached pods to what the controller reads (identity, labels, node,
// phase, deletion) when enabled: the controller watches every pod of the cluster, and a full
// pod is tens of kilobytes. Nothing else in the operator reads pods from the cache (the
// SecondaryScheduler controller lists its few pods from the API server); a future reader that
// needs full pods must widen stripPod.
func CacheOptions(enabled bool) cache.Options {
	if !enabled {
		return cache.Options{}
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:  {Transform: stripPod},
		&corev1.Node{}: {Transform: stripNode},
	}}
}

// stripNode drops what no reader of cached nodes uses and what makes a node large: the
// images it holds and the managed fields. (The PodNetwork controller reads addresses and
// pod ranges; nodeDead reads conditions from the API server.)
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields, n.Status.Images = nil, nil
	return n, nil
}

func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp, CreationTimestamp: p.CreationTimestamp,
			// why: the isolation marker writer (pkg/isolation/marker) shares this cache and leaves
			// DaemonSet and mirror pods (owned by the Node) out of a node's classes.
			OwnerReferences: p.OwnerReferences,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}
