package operator

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// Cleanup deletes every SecondaryScheduler in namespace and does the finalizer's work for each
// itself (deleting the cluster-scoped RBAC and the kube-system RoleBinding, then removing the
// finalizer), so it finishes whether or not an operator is still running. The chart runs it as
// a pre-delete hook: Helm deletes custom resources last, after the operator and its RBAC, which
// would leave every resource stuck on its finalizer and its cluster-scoped RBAC behind.
// It returns when no SecondaryScheduler is left in namespace, or when ctx ends.
func Cleanup(ctx context.Context, c client.Client, namespace string) error {
	r := &Reconciler{Client: c}
	for {
		var list berthv1alpha1.SecondarySchedulerList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return fmt.Errorf("listing SecondarySchedulers in %s: %w", namespace, err)
		}
		if len(list.Items) == 0 {
			return nil
		}
		for i := range list.Items {
			ss := &list.Items[i]
			if ss.DeletionTimestamp.IsZero() {
				if err := c.Delete(ctx, ss); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("deleting SecondaryScheduler %s/%s: %w", ss.Namespace, ss.Name, err)
				}
			}
			// A running operator may remove the finalizer at the same time: a conflict just
			// means another round.
			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ss)}); err != nil && !apierrors.IsConflict(err) {
				return fmt.Errorf("cleaning up SecondaryScheduler %s/%s: %w", ss.Namespace, ss.Name, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("SecondarySchedulers left in %s: %w", namespace, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
