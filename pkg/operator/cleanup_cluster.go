package operator

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// The cluster-wide objects the hook removes, by kind only: PodConfigs are read as unstructured
// (metadata and status conditions) and the others as metadata, never through the Go types of
// their specs. Why: the hook of a release must work against whatever the CRDs in the cluster
// hold, including objects stored under an older or newer shape of the spec, which a typed list
// would fail to decode (and the PodConfig API is still changing).
var (
	podConfigListGVK  = berthv1alpha1.GroupVersion.WithKind("PodConfigList")
	podNetworkListGVK = berthv1alpha1.GroupVersion.WithKind("PodNetworkList")
	ipAllocationsGVK  = berthv1alpha1.GroupVersion.WithKind("IPAllocationList")
	nodeImagesListGVK = berthv1alpha1.GroupVersion.WithKind("NodeImagesList")
	grantsListGVK     = berthv1alpha1.GroupVersion.WithKind("GrantsList")
)

// deletePodConfigs deletes every PodConfig of the cluster and waits until none is left, i.e.
// until the running operator and node agents have removed every link and freed every address
// and the operator has dropped its finalizer. On ctx's end the error names each PodConfig
// still there and what its status says.
func deletePodConfigs(ctx context.Context, c client.Client, interval time.Duration) error {
	var last []unstructured.Unstructured
	stuck := func(err error) error {
		return fmt.Errorf("PodConfigs still present, their network links and addresses not removed (the operator and the node "+
			"agents remove them before the operator drops the %s finalizer; see pkg/podconfig/README.md, "+
			"\"When the operator is gone\"): %s: %w", berthv1alpha1.PodConfigFinalizer, describePodConfigs(last), err)
	}
	for {
		list, served, err := listPodConfigs(ctx, c)
		if err != nil && ctx.Err() != nil && len(last) > 0 {
			return stuck(ctx.Err()) // the deadline hit the listing: name what the last one saw
		}
		if err != nil || !served {
			return err
		}
		last = list
		if len(list) == 0 {
			return nil
		}
		for i := range list {
			pc := &list[i]
			if pc.GetDeletionTimestamp() != nil {
				continue
			}
			if err := c.Delete(ctx, pc); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting PodConfig %s/%s: %w", pc.GetNamespace(), pc.GetName(), err)
			}
		}
		select {
		case <-ctx.Done():
			return stuck(ctx.Err())
		case <-time.After(interval):
		}
	}
}

// checkNoPodConfigs fails if a PodConfig exists (one created while the hook ran, after the
// operator was stopped: its finalizer, if the operator added it, would now hold it forever).
func checkNoPodConfigs(ctx context.Context, c client.Client) error {
	list, _, err := listPodConfigs(ctx, c)
	if err != nil {
		return err
	}
	if len(list) > 0 {
		return fmt.Errorf("PodConfigs created while the operator was being stopped: %s (helm upgrade brings the operator back; "+
			"or see pkg/podconfig/README.md, \"When the operator is gone\")", describePodConfigs(list))
	}
	return nil
}

// listPodConfigs lists every PodConfig; served is false when the API server does not know the
// kind (the CRD is not installed), which leaves nothing to clean.
func listPodConfigs(ctx context.Context, c client.Client) ([]unstructured.Unstructured, bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(podConfigListGVK)
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			log.FromContext(ctx).Info("PodConfig kind not served: no PodConfig to delete")
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("listing PodConfigs: %w", err)
	}
	return list.Items, true, nil
}

// describePodConfigs names each PodConfig (namespace/name) with why it is still there: its
// Ready and Degraded condition messages, or that it has none (no operator has handled it).
func describePodConfigs(list []unstructured.Unstructured) string {
	out := make([]string, 0, len(list))
	for i := range list {
		pc := &list[i]
		var why []string
		conds, _, _ := unstructured.NestedSlice(pc.Object, "status", "conditions")
		for _, want := range []string{"Ready", "Degraded"} {
			for _, raw := range conds {
				cond, ok := raw.(map[string]any)
				if !ok || cond["type"] != want {
					continue
				}
				why = append(why, fmt.Sprintf("%s=%v (%v): %v", want, cond["status"], cond["reason"], cond["message"]))
			}
		}
		if len(why) == 0 {
			why = append(why, "no Ready or Degraded condition: no operator has handled it")
		}
		if fin := pc.GetFinalizers(); len(fin) > 0 {
			why = append(why, "finalizers "+strings.Join(fin, ","))
		}
		out = append(out, fmt.Sprintf("%s/%s [%s]", pc.GetNamespace(), pc.GetName(), strings.Join(why, "; ")))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// releaseNetworks runs once no PodConfig is left and the operator is stopped, so no address is
// allocated and nobody writes IPAllocations any more: it drops the operator's finalizer from
// every PodNetwork (kept: they are the administrator's network definitions, picked up again by a
// reinstalled operator, and would otherwise wait forever on an operator that is gone) and
// deletes every IPAllocation (the operator's own bookkeeping, re-created on demand).
func releaseNetworks(ctx context.Context, c client.Client) error {
	networks, err := listMetadata(ctx, c, podNetworkListGVK)
	if err != nil {
		return err
	}
	for i := range networks {
		pn := &networks[i]
		if !slices.Contains(pn.Finalizers, berthv1alpha1.PodNetworkFinalizer) {
			continue
		}
		orig := pn.DeepCopy()
		pn.Finalizers = slices.DeleteFunc(slices.Clone(pn.Finalizers), func(f string) bool { return f == berthv1alpha1.PodNetworkFinalizer })
		// Optimistic lock: a merge patch replaces the whole finalizer list, which must not drop
		// a finalizer someone else added meanwhile; a conflict fails the hook, whose retry re-reads.
		if err := c.Patch(ctx, pn, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing the %s finalizer from PodNetwork %s: %w", berthv1alpha1.PodNetworkFinalizer, pn.Name, err)
		}
		log.FromContext(ctx).Info("released PodNetwork", "podNetwork", pn.Name)
	}
	return deleteAllMetadata(ctx, c, ipAllocationsGVK, "IPAllocation")
}

// stopAgents deletes the agent DaemonSet and waits until none of its pods is left. Why delete
// it rather than wait for Helm: the agents re-create their node's NodeImages within one
// --image-interval, so NodeImages deleted while any agent runs would come back; with the
// DaemonSet gone (foreground: its pods go first) nothing writes them any more. Helm deletes the
// DaemonSet next anyway and takes NotFound as done; an abandoned uninstall gets it back with
// `helm upgrade`. (Scaling is no option for a DaemonSet, and a nodeSelector matching no node
// would leave a changed object for Helm's three-way merge to argue with.)
func stopAgents(ctx context.Context, c client.Client, interval time.Duration, namespace, name string) error {
	ds := &appsv1.DaemonSet{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, ds)
	if apierrors.IsNotFound(err) {
		log.FromContext(ctx).Info("agent DaemonSet not found: nothing to stop", "daemonSet", name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting the agent DaemonSet %s/%s: %w", namespace, name, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		// An empty selector would match every pod in the namespace, including this one.
		return fmt.Errorf("agent DaemonSet %s/%s: unusable selector %v: %v", namespace, name, ds.Spec.Selector, err)
	}
	if ds.DeletionTimestamp.IsZero() {
		if err := c.Delete(ctx, ds, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the agent DaemonSet %s/%s: %w", namespace, name, err)
		}
	}
	return waitNoPods(ctx, c, interval, namespace, sel, "agent pods of DaemonSet "+name)
}

// deleteNodeImages deletes every NodeImages object (one per node, written only by the agents,
// which are stopped by now).
func deleteNodeImages(ctx context.Context, c client.Client) error {
	return deleteAllMetadata(ctx, c, nodeImagesListGVK, "NodeImages")
}

// deleteGrants deletes every Grants object (the operator's view of each namespace's grants,
// pkg/grants): with the operator gone nobody would keep them current, and a stale view would
// tell tenants of networks and classes that may since have been withdrawn.
func deleteGrants(ctx context.Context, c client.Client) error {
	return deleteAllMetadata(ctx, c, grantsListGVK, "Grants")
}

// listMetadata lists the objects of a kind as metadata only; a kind the API server does not
// serve has none.
func listMetadata(ctx context.Context, c client.Client, listGVK schema.GroupVersionKind) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(listGVK)
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing %s: %w", strings.TrimSuffix(listGVK.Kind, "List"), err)
	}
	return list.Items, nil
}

func deleteAllMetadata(ctx context.Context, c client.Client, listGVK schema.GroupVersionKind, kind string) error {
	items, err := listMetadata(ctx, c, listGVK)
	if err != nil {
		return err
	}
	for i := range items {
		o := &items[i]
		if o.GetDeletionTimestamp() != nil {
			continue
		}
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s %s: %w", kind, o.Name, err)
		}
	}
	if len(items) > 0 {
		log.FromContext(ctx).Info("deleted", "kind", kind, "count", len(items))
	}
	return nil
}
