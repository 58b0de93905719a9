package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// CleanupOptions say what Cleanup removes besides the SecondarySchedulers.
type CleanupOptions struct {
	// Namespace whose SecondarySchedulers (and their schedulers' Leases) go.
	Namespace string
	// OperatorDeployment is the operator's Deployment in Namespace; it is scaled to 0 first.
	OperatorDeployment string
	// OperatorLease is the operator's leader-election Lease (its LeaderElectionID) in
	// OperatorLeaseNamespace (default Namespace).
	OperatorLease          string
	OperatorLeaseNamespace string
	// PodConfigs: delete every PodConfig of the cluster first, while the operator and the node
	// agents still run, and wait until they are gone; then, with the operator stopped, release
	// the PodNetworks' finalizer and delete the IPAllocations (chart: podConfig.enabled).
	PodConfigs bool
	// AgentDaemonSet is the agent DaemonSet in Namespace, stopped (deleted) before NodeImages
	// are deleted, so no agent re-creates them; "" stops none.
	AgentDaemonSet string
	// NodeImages: delete every NodeImages object (chart: agent.enabled).
	NodeImages bool
	// Grants: delete every Grants object once the operator, their only writer, is stopped
	// (chart: grants.enabled).
	Grants bool
	// IsolationMarkers: remove the autoscaler marker label from every node once the operator,
	// its only writer, is stopped (chart: isolation.autoscalerMarker.enabled).
	IsolationMarkers bool
	// Interval between polls (default 500ms).
	Interval time.Duration
}

// Cleanup is the chart's pre-delete hook: it removes everything of Berth in a namespace that
// Helm alone would leave behind, whether or not an operator still runs. Helm deletes custom
// resources last, after the operator and its RBAC, which would leave every SecondaryScheduler
// stuck on its finalizer and its cluster-scoped RBAC behind; and leader-election Leases are
// written by client-go, not by the chart, so Helm does not know them.
//
// PodConfigs hold a finalizer that only the running operator removes, once the node agents
// have taken down every link, and NodeImages are written by the agents, which re-create them
// while they run; and a Lease cannot simply be deleted while its holder runs: client-go's
// leader election creates a missing Lease again on its next renewal. So the order matters:
//
//  1. (PodConfigs) delete every PodConfig and wait until they are gone, while the operator
//     and the agents still run; if they do not go in time, stop here with an error naming
//     each one and its Ready/Degraded message, before anything else is touched;
//  2. stop the operator: scale its Deployment to 0 and wait until none of its pods remains;
//  3. (PodConfigs) check that no PodConfig appeared meanwhile, drop the operator's finalizer
//     from the PodNetworks and delete the IPAllocations;
//     (Grants) delete every Grants object: nobody keeps them current any more;
//     (IsolationMarkers) remove the autoscaler marker label from every node;
//  4. (AgentDaemonSet) delete the agent DaemonSet and wait until its pods are gone;
//     (NodeImages) then delete every NodeImages object;
//  5. delete every SecondaryScheduler in the namespace and do the finalizer's work (the
//     cluster-scoped RBAC and the kube-system RoleBinding) ourselves;
//  6. wait until the scheduler pods of those resources are gone (the garbage collector
//     removes their Deployments through owner references);
//  7. delete the operator's Lease and each scheduler's Lease: nobody holds them any more.
//
// (A scheduler Lease pre-created by the operator with an owner reference to the resource
// would be collected together with the Deployment, i.e. possibly while the scheduler still
// renews it, which would then re-create it without the owner reference: the explicit wait is
// what makes the deletion stick.)
//
// Every step is idempotent (NotFound is success), so a retried hook finishes the job. Each
// wait ends with ctx; the error then names what is still there.
func Cleanup(ctx context.Context, c client.Client, o CleanupOptions) error {
	if o.Namespace == "" || o.OperatorDeployment == "" || o.OperatorLease == "" {
		return errors.New("cleanup needs the namespace, the operator's Deployment and the operator's Lease name")
	}
	if o.OperatorLeaseNamespace == "" {
		o.OperatorLeaseNamespace = o.Namespace
	}
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	logger := log.FromContext(ctx).WithValues("namespace", o.Namespace)

	if o.PodConfigs {
		logger.Info("deleting every PodConfig while the operator and the node agents still run")
		if err := deletePodConfigs(ctx, c, o.Interval); err != nil {
			return err
		}
		logger.Info("no PodConfig left: links removed, addresses freed")
	}

	logger.Info("stopping the operator", "deployment", o.OperatorDeployment)
	if err := stopOperator(ctx, c, o); err != nil {
		return err
	}
	logger.Info("operator stopped: no operator pod left")

	if err := cleanupOperatorWrites(ctx, c, o, logger); err != nil {
		return err
	}
	if err := cleanupAgentWrites(ctx, c, o, logger); err != nil {
		return err
	}

	logger.Info("deleting SecondarySchedulers")
	deleted, err := deleteSchedulers(ctx, c, o)
	if err != nil {
		return err
	}
	logger.Info("SecondarySchedulers deleted", "count", len(deleted))
	return deleteLeases(ctx, c, o, deleted, logger)
}

// cleanupOperatorWrites removes, once the operator is stopped, what only the operator writes
// and Helm does not know: the PodNetworks' finalizer and the IPAllocations, Grants and the
// isolation markers, as o asks.
func cleanupOperatorWrites(ctx context.Context, c client.Client, o CleanupOptions, logger logr.Logger) error {
	if o.PodConfigs {
		if err := checkNoPodConfigs(ctx, c); err != nil {
			return err
		}
		if err := releaseNetworks(ctx, c); err != nil {
			return err
		}
		logger.Info("PodNetworks released, IPAllocations deleted")
	}
	if o.Grants {
		if err := deleteGrants(ctx, c); err != nil {
			return err
		}
		logger.Info("Grants deleted")
	}
	if o.IsolationMarkers {
		n, err := removeIsolationMarkers(ctx, c)
		if err != nil {
			return err
		}
		logger.Info("isolation markers removed", "nodes", n)
	}
	return nil
}

// cleanupAgentWrites stops the agents, then deletes the NodeImages they would re-create, as o
// asks.
func cleanupAgentWrites(ctx context.Context, c client.Client, o CleanupOptions, logger logr.Logger) error {
	if o.AgentDaemonSet != "" {
		logger.Info("stopping the agents", "daemonSet", o.AgentDaemonSet)
		if err := stopAgents(ctx, c, o.Interval, o.Namespace, o.AgentDaemonSet); err != nil {
			return err
		}
	}
	if o.NodeImages {
		if err := deleteNodeImages(ctx, c); err != nil {
			return err
		}
		logger.Info("NodeImages deleted")
	}
	return nil
}

// deleteLeases waits until the pods of each deleted scheduler are gone, then deletes the
// operator's Lease and the schedulers'.
func deleteLeases(ctx context.Context, c client.Client, o CleanupOptions, deleted []*berthv1alpha1.SecondaryScheduler, logger logr.Logger) error {
	// A list, not a set: the operator's Lease goes first and the order is the same every
	// time (the logs and the tests read it).
	leases := []types.NamespacedName{{Namespace: o.OperatorLeaseNamespace, Name: o.OperatorLease}}
	for _, ss := range deleted {
		logger.Info("waiting for the scheduler's pods to go", "secondaryScheduler", ss.Name)
		what := fmt.Sprintf("scheduler pods of SecondaryScheduler %s/%s", ss.Namespace, ss.Name)
		if err := waitNoPods(ctx, c, o.Interval, ss.Namespace, labels.SelectorFromSet(PodLabels(ss)), what); err != nil {
			return err
		}
		if key := (types.NamespacedName{Namespace: ss.Namespace, Name: LeaseName(ss)}); !slices.Contains(leases, key) {
			leases = append(leases, key)
		}
	}

	for _, key := range leases {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := c.Delete(ctx, l); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Lease %s: %w", key, err)
		}
		logger.Info("deleted leader-election Lease", "lease", key.String())
	}
	return nil
}

// stopOperator scales the operator's Deployment to 0 and waits until none of its pods is
// left (a terminating operator may still renew its Lease). A missing Deployment is nothing to
// stop. If the uninstall is abandoned afterwards, `helm upgrade` restores the replicas.
func stopOperator(ctx context.Context, c client.Client, o CleanupOptions) error {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.OperatorDeployment}, d)
	if apierrors.IsNotFound(err) {
		log.FromContext(ctx).Info("operator Deployment not found: nothing to stop", "deployment", o.OperatorDeployment)
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting the operator Deployment %s/%s: %w", o.Namespace, o.OperatorDeployment, err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
		if err := c.Patch(ctx, d, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("scaling the operator Deployment %s/%s to 0: %w", o.Namespace, o.OperatorDeployment, err)
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		// An empty selector would match every pod in the namespace, including this one.
		return fmt.Errorf("operator Deployment %s/%s: unusable selector %v: %v", o.Namespace, o.OperatorDeployment, d.Spec.Selector, err)
	}
	return waitNoPods(ctx, c, o.Interval, o.Namespace, sel, "operator pods of Deployment "+o.OperatorDeployment)
}

// deleteSchedulers deletes every SecondaryScheduler in the namespace and does the finalizer's
// work for each itself, then waits until none is left. It returns every resource it saw.
//
// The deletion is in the foreground: the garbage collector keeps a resource until its
// Deployment, ReplicaSets and pods are gone, so a hook retried after a timeout in step 3 still
// finds the resource, and with it the Lease name to delete.
func deleteSchedulers(ctx context.Context, c client.Client, o CleanupOptions) ([]*berthv1alpha1.SecondaryScheduler, error) {
	r := &Reconciler{Client: c}
	seen := map[types.NamespacedName]*berthv1alpha1.SecondaryScheduler{}
	for {
		var list berthv1alpha1.SecondarySchedulerList
		if err := c.List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
			return nil, fmt.Errorf("listing SecondarySchedulers in %s: %w", o.Namespace, err)
		}
		if len(list.Items) == 0 {
			out := make([]*berthv1alpha1.SecondaryScheduler, 0, len(seen))
			for _, ss := range seen {
				out = append(out, ss)
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
			return out, nil
		}
		var left []string
		for i := range list.Items {
			ss := &list.Items[i]
			seen[client.ObjectKeyFromObject(ss)] = ss.DeepCopy()
			left = append(left, ss.Name)
			if ss.DeletionTimestamp.IsZero() {
				if err := c.Delete(ctx, ss, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
					return nil, fmt.Errorf("deleting SecondaryScheduler %s/%s: %w", ss.Namespace, ss.Name, err)
				}
			}
			// Another writer may remove the finalizer at the same time: a conflict just
			// means another round.
			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ss)}); err != nil && !apierrors.IsConflict(err) {
				return nil, fmt.Errorf("cleaning up SecondaryScheduler %s/%s: %w", ss.Namespace, ss.Name, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("SecondarySchedulers left in %s: %s: %w", o.Namespace, strings.Join(left, ", "), ctx.Err())
		case <-time.After(o.Interval):
		}
	}
}

// waitNoPods polls until no pod in namespace matches sel; what names them in the error.
func waitNoPods(ctx context.Context, c client.Client, interval time.Duration, namespace string, sel labels.Selector, what string) error {
	for {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return fmt.Errorf("listing %s: %w", what, err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			names := make([]string, len(pods.Items))
			for i, p := range pods.Items {
				names[i] = p.Name
			}
			return fmt.Errorf("%s still in %s: %s: %w", what, namespace, strings.Join(names, ", "), ctx.Err())
		case <-time.After(interval):
		}
	}
}
