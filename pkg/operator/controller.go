// Package operator reconciles SecondarySchedulers: it renders and validates the scheduler's
// configuration (pkg/scheduler/schedconfig) and only then applies the ServiceAccount, RBAC,
// ConfigMap and Deployment; an invalid configuration leaves the running scheduler untouched
// and is reported in the Degraded condition, naming the field.
package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

// Condition reasons.
const (
	ReasonAsExpected           = "AsExpected"
	ReasonInvalidConfiguration = "InvalidConfiguration"
	ReasonConfigMapMissing     = "ConfigMapNotFound"
	ReasonApplyFailed          = "ApplyFailed"
	ReasonRollingOut           = "RollingOut"
	ReasonRolloutComplete      = "RolloutComplete"
	ReasonMinimumAvailable     = "MinimumReplicasAvailable"
	ReasonNoReplicas           = "NoReplicasAvailable"
	ReasonDeploymentMissing    = "DeploymentNotFound"
	ReasonUnmanaged            = "Unmanaged"
	ReasonRemoved              = "Removed"
	ReasonImagePullFailed      = "ImagePullFailed"
	ReasonPodsFailing          = "SchedulerPodsFailing"
	ReasonNoLeader             = "NoLeader"
)

// Reconciler reconciles SecondarySchedulers.
type Reconciler struct {
	Client client.Client
	Scheme *runtime.Scheme
	// APIReader reads the scheduler's pods straight from the API server, namespaced and by
	// label: caching every pod in the cluster to watch a few would cost more than it saves.
	// Nil: pods are not inspected.
	APIReader client.Reader
}

// Scheme returns a scheme with the built-in types and Berth's API.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := berthv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// SetupWithManager registers the controller: the resource, what it owns, the ConfigMaps that
// raw configurations reference (including ones created after the resource) and the
// cluster-scoped RBAC it labels.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabels := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l[LabelOwnerName] == "" || l[LabelManagedBy] != ManagerName {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[LabelOwnerNamespace], Name: l[LabelOwnerName]}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&berthv1alpha1.SecondaryScheduler{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return e.ObjectNew.GetDeletionTimestamp() != nil }}))).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.configMapUsers)).
		Watches(&rbacv1.ClusterRole{}, byLabels).
		Watches(&rbacv1.ClusterRoleBinding{}, byLabels).
		Watches(&rbacv1.RoleBinding{}, byLabels).
		Complete(r)
}

// configMapUsers maps a ConfigMap to the resources whose configuration it holds (a raw
// configuration by reference, or the rendered one the operator owns).
func (r *Reconciler) configMapUsers(ctx context.Context, o client.Object) []reconcile.Request {
	var list berthv1alpha1.SecondarySchedulerList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, ss := range list.Items {
		if (ss.Spec.ConfigMapRef != nil && ss.Spec.ConfigMapRef.Name == o.GetName()) || ConfigMapName(&ss) == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name}})
		}
	}
	return reqs
}

// Reconcile brings one SecondaryScheduler's objects and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	ss := &berthv1alpha1.SecondaryScheduler{}
	if err := r.Client.Get(ctx, req.NamespacedName, ss); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !ss.DeletionTimestamp.IsZero() {
		if err := r.deleteUnowned(ctx, ss); err != nil {
			return reconcile.Result{}, err
		}
		orig := ss.DeepCopy()
		if controllerutil.RemoveFinalizer(ss, Finalizer) {
			if err := r.Client.Patch(ctx, ss, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
		}
		logger.Info("cleaned up cluster-scoped objects")
		return reconcile.Result{}, nil
	}
	// Why a patch of the finalizers and not an Update: an Update sends the whole object as this
	// operator's types encode it, and the user's spec must go back exactly as written (a decimal
	// arg written as a string, for one).
	orig := ss.DeepCopy()
	if controllerutil.AddFinalizer(ss, Finalizer) {
		if err := r.Client.Patch(ctx, ss, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		} else if err != nil {
			return reconcile.Result{}, err
		}
	}
	status := ss.Status.DeepCopy()
	status.ObservedGeneration = ss.Generation
	var reconcileErr error
	switch ss.Spec.ManagementState {
	case berthv1alpha1.Unmanaged:
		// Hands off: nothing is applied or deleted; status still says what runs.
		set(status, berthv1alpha1.ConditionDegraded, false, ReasonUnmanaged, "managementState is Unmanaged: the operator does not change the scheduler's objects")
		r.observeDeployment(ctx, ss, status, ReasonUnmanaged)
	case berthv1alpha1.Removed:
		reconcileErr = r.remove(ctx, ss)
		status.ConfigHash = ""
		status.ReadyReplicas = 0
		msg := "managementState is Removed: the scheduler's objects are deleted"
		set(status, berthv1alpha1.ConditionAvailable, false, ReasonRemoved, msg)
		set(status, berthv1alpha1.ConditionProgressing, false, ReasonRemoved, msg)
		if reconcileErr != nil {
			set(status, berthv1alpha1.ConditionDegraded, true, ReasonApplyFailed, reconcileErr.Error())
		} else {
			set(status, berthv1alpha1.ConditionDegraded, false, ReasonRemoved, msg)
		}
	default:
		reconcileErr = r.manage(ctx, ss, status)
	}
	if err := r.Client.Status().Update(ctx, &berthv1alpha1.SecondaryScheduler{
		TypeMeta: ss.TypeMeta, ObjectMeta: ss.ObjectMeta, Spec: ss.Spec, Status: *status}); err != nil {
		if apierrors.IsConflict(err) && reconcileErr == nil {
			// The resource changed while we worked (a spec edit): its event requeues us.
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, errors.Join(reconcileErr, err)
	}
	if reconcileErr == nil && meta.IsStatusConditionTrue(status.Conditions, berthv1alpha1.ConditionProgressing) {
		// A rollout's pods change state without touching the Deployment (an image pull
		// failing, a container crashing): look again until the rollout settles.
		return reconcile.Result{RequeueAfter: rolloutRecheck}, nil
	}
	if reconcileErr == nil && r.APIReader != nil && ss.Spec.ManagementState != berthv1alpha1.Removed {
		// A leader is gained and lost without any event the controller watches: look at the
		// Lease again, soon while there is none.
		if c := meta.FindStatusCondition(status.Conditions, berthv1alpha1.ConditionAvailable); c != nil && c.Reason == ReasonNoLeader {
			return reconcile.Result{RequeueAfter: rolloutRecheck}, nil
		}
		return reconcile.Result{RequeueAfter: leaderRecheck}, nil
	}
	return reconcile.Result{}, reconcileErr
}

const (
	// rolloutRecheck is how often a rolling-out (or leaderless) scheduler is inspected.
	rolloutRecheck = 10 * time.Second
	// leaderRecheck is how often a settled scheduler's Lease is looked at.
	leaderRecheck = 30 * time.Second
)

// manage renders and validates, and applies only a valid configuration.
func (r *Reconciler) manage(ctx context.Context, ss *berthv1alpha1.SecondaryScheduler, status *berthv1alpha1.SecondarySchedulerStatus) error {
	logger := log.FromContext(ctx)
	var raw []byte
	if ref := ss.Spec.ConfigMapRef; ref != nil {
		if ref.Name == ConfigMapName(ss) {
			// The operator writes the rendered configuration there: reading the user's input
			// from it would overwrite that input with its own output.
			set(status, berthv1alpha1.ConditionDegraded, true, ReasonInvalidConfiguration,
				fmt.Sprintf("spec.configMapRef.name: %q is the ConfigMap the operator writes the rendered configuration to; put the raw configuration in a ConfigMap with another name; the running scheduler is unchanged", ref.Name))
			r.observeDeployment(ctx, ss, status, "")
			return nil
		}
		key := ref.Key
		if key == "" {
			key = ConfigKey
		}
		cm := &corev1.ConfigMap{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ref.Name}, cm)
		switch {
		case apierrors.IsNotFound(err):
			set(status, berthv1alpha1.ConditionDegraded, true, ReasonConfigMapMissing,
				fmt.Sprintf("spec.configMapRef: ConfigMap %s/%s not found; the running scheduler is unchanged", ss.Namespace, ref.Name))
			r.observeDeployment(ctx, ss, status, "")
			return nil // the ConfigMap watch brings us back when it appears
		case err != nil:
			return err
		}
		data, ok := cm.Data[key]
		if !ok {
			set(status, berthv1alpha1.ConditionDegraded, true, ReasonConfigMapMissing,
				fmt.Sprintf("spec.configMapRef: ConfigMap %s/%s has no key %q; the running scheduler is unchanged", ss.Namespace, ref.Name, key))
			r.observeDeployment(ctx, ss, status, "")
			return nil
		}
		raw = []byte(data)
	}
	rendered, err := schedconfig.Render(ss, raw)
	if err != nil {
		msg := schedconfig.ErrorMessage(err) + "; the running scheduler is unchanged"
		logger.Info("invalid scheduler configuration, not rolling out", "error", msg)
		set(status, berthv1alpha1.ConditionDegraded, true, ReasonInvalidConfiguration, msg)
		r.observeDeployment(ctx, ss, status, "")
		return nil // a spec or ConfigMap change brings us back; retrying cannot help
	}
	if err := r.apply(ctx, ss, rendered); err != nil {
		set(status, berthv1alpha1.ConditionDegraded, true, ReasonApplyFailed, err.Error())
		r.observeDeployment(ctx, ss, status, "")
		return err
	}
	status.ConfigHash = rendered.Hash
	set(status, berthv1alpha1.ConditionDegraded, false, ReasonAsExpected, "configuration "+rendered.Hash+" is valid and applied")
	r.observeDeployment(ctx, ss, status, "")
	if reason, msg := r.podProblem(ctx, ss); reason != "" {
		set(status, berthv1alpha1.ConditionDegraded, true, reason, msg)
	}
	return nil
}

// podProblem names the first scheduler pod that cannot start and why. A bad image or a
// crashing binary only shows on the pods; the Deployment keeps the previous replicas running.
func (r *Reconciler) podProblem(ctx context.Context, ss *berthv1alpha1.SecondaryScheduler) (reason, msg string) {
	if r.APIReader == nil {
		return "", ""
	}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(ss.Namespace), client.MatchingLabels(PodLabels(ss))); err != nil {
		log.FromContext(ctx).Info("cannot inspect scheduler pods", "error", err.Error())
		return "", ""
	}
	for _, p := range pods.Items {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			w := cs.State.Waiting
			if w == nil {
				continue
			}
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				return ReasonImagePullFailed, fmt.Sprintf("scheduler pod %s cannot pull image %q (%s: %s); fix spec.image; running replicas are kept",
					p.Name, cs.Image, w.Reason, w.Message)
			case "CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError":
				return ReasonPodsFailing, fmt.Sprintf("scheduler pod %s container %s: %s: %s", p.Name, cs.Name, w.Reason, w.Message)
			}
		}
	}
	return "", ""
}

func (r *Reconciler) apply(ctx context.Context, ss *berthv1alpha1.SecondaryScheduler, rendered *schedconfig.Rendered) error {
	objs := []client.Object{ServiceAccount(ss)}
	RBAC(ss).Each(func(o metav1.Object) { objs = append(objs, o.(client.Object)) })
	objs = append(objs, ConfigMap(ss, rendered), Deployment(ss, rendered))
	for _, o := range objs {
		if err := r.checkNotAdopting(ctx, ss, o); err != nil {
			return err
		}
	}
	for _, o := range objs {
		if err := r.ssa(ctx, o); err != nil {
			return err
		}
	}
	pdb := PodDisruptionBudget(ss)
	if replicas(ss) > 1 {
		return r.ssa(ctx, pdb)
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, pdb))
}

// ssa server-side applies o as the operator: fields it sets are enforced, fields others set
// (defaults, other controllers) are left alone, and an unchanged object is not written.
// checkNotAdopting refuses to take over an object of the same name that this resource does not
// own: server-side apply with forced ownership would silently overwrite a user's ConfigMap or
// Deployment, and the owner reference would delete it with the resource.
func (r *Reconciler) checkNotAdopting(ctx context.Context, ss *berthv1alpha1.SecondaryScheduler, o client.Object) error {
	if len(o.GetOwnerReferences()) == 0 {
		return nil // cluster-scoped objects are tracked by label, not owned
	}
	existing, ok := o.DeepCopyObject().(client.Object)
	if !ok {
		return nil
	}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(o), existing)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == ss.UID {
		return nil
	}
	gvk, _ := r.Client.GroupVersionKindFor(o)
	return fmt.Errorf("%s %s exists and is not managed by SecondaryScheduler %s/%s: rename or delete it (the operator does not take over objects it did not create)",
		gvk.Kind, client.ObjectKeyFromObject(o), ss.Namespace, ss.Name)
}

func (r *Reconciler) ssa(ctx context.Context, o client.Object) error {
	gvk, err := r.Client.GroupVersionKindFor(o)
	if err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(ManagerName), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(o), err)
	}
	return nil
}

// remove deletes every object the operator made for ss (managementState Removed).
func (r *Reconciler) remove(ctx context.Context, ss *berthv1alpha1.SecondaryScheduler) error {
	var errs []error
	for _, o := range []client.Object{Deployment(ss, &schedconfig.Rendered{}), PodDisruptionBudget(ss),
		ConfigMap(ss, &schedconfig.Rendered{}), ServiceAccount(ss)} {
		if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	RBAC(ss).Each(func(o metav1.Object) {
		if err := r.Client.Delete(ctx, o.(client.Object)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	})
	return errors.Join(errs...)
}

// deleteUnowned deletes what owner references cannot collect: cluster-scoped RBAC and the
// kube-system RoleBinding. It finds them by label, so objects of an earlier spec go too.
func (r *Reconciler) deleteUnowned(ctx context.Context, ss *berthv1alpha1.SecondaryScheduler) error {
	sel := client.MatchingLabels{LabelOwnerNamespace: ss.Namespace, LabelOwnerName: ss.Name, LabelManagedBy: ManagerName}
	var errs []error
	del := func(o client.Object) {
		if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	var crbs rbacv1.ClusterRoleBindingList
	if err := r.Client.List(ctx, &crbs, sel); err != nil {
		return err
	}
	for i := range crbs.Items {
		del(&crbs.Items[i])
	}
	var crs rbacv1.ClusterRoleList
	if err := r.Client.List(ctx, &crs, sel); err != nil {
		return err
	}
	for i := range crs.Items {
		del(&crs.Items[i])
	}
	var rbs rbacv1.RoleBindingList
	if err := r.Client.List(ctx, &rbs, sel); err != nil {
		return err
	}
	for i := range rbs.Items {
		if rbs.Items[i].Namespace != ss.Namespace {
			del(&rbs.Items[i])
		}
	}
	return errors.Join(errs...)
}

// observeDeployment sets Available, Progressing and readyReplicas from the Deployment.
func (r *Reconciler) observeDeployment(ctx context.Context, ss *berthv1alpha1.SecondaryScheduler, status *berthv1alpha1.SecondarySchedulerStatus, progressingOverride string) {
	d := &appsv1.Deployment{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: DeploymentName(ss)}, d)
	if err != nil {
		status.ReadyReplicas = 0
		msg := fmt.Sprintf("Deployment %s/%s: %v", ss.Namespace, DeploymentName(ss), err)
		set(status, berthv1alpha1.ConditionAvailable, false, ReasonDeploymentMissing, msg)
		if progressingOverride != "" {
			set(status, berthv1alpha1.ConditionProgressing, false, progressingOverride, msg)
		} else {
			set(status, berthv1alpha1.ConditionProgressing, false, ReasonDeploymentMissing, msg)
		}
		return
	}
	status.ReadyReplicas = d.Status.ReadyReplicas
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.AvailableReplicas > 0 {
		// A replica the kubelet reports Ready is not yet a scheduler that schedules: only the
		// one holding the Lease does (a pod on a node where nothing really runs, or one that
		// cannot reach the API server, holds none).
		if why := r.noLeader(ctx, ss, time.Now()); why != "" {
			set(status, berthv1alpha1.ConditionAvailable, false, ReasonNoLeader,
				fmt.Sprintf("%d/%d scheduler replicas available, but %s: pods for %s are not being scheduled", d.Status.AvailableReplicas, want, why, schedulerName(ss)))
		} else {
			set(status, berthv1alpha1.ConditionAvailable, true, ReasonMinimumAvailable,
				fmt.Sprintf("%d/%d scheduler replicas available", d.Status.AvailableReplicas, want))
		}
	} else {
		set(status, berthv1alpha1.ConditionAvailable, false, ReasonNoReplicas,
			fmt.Sprintf("0/%d scheduler replicas available", want))
	}
	if progressingOverride != "" {
		set(status, berthv1alpha1.ConditionProgressing, false, progressingOverride, "the operator is not rolling out changes")
		return
	}
	rolling := d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want ||
		d.Status.Replicas > d.Status.UpdatedReplicas || d.Status.AvailableReplicas < want
	if rolling {
		set(status, berthv1alpha1.ConditionProgressing, true, ReasonRollingOut,
			fmt.Sprintf("rolling out: %d/%d updated, %d available", d.Status.UpdatedReplicas, want, d.Status.AvailableReplicas))
	} else {
		set(status, berthv1alpha1.ConditionProgressing, false, ReasonRolloutComplete, "all replicas run the current configuration")
	}
}

// noLeader says why no replica leads (empty when one does): the scheduler's Lease is missing,
// has no holder, or its holder stopped renewing it. Without an APIReader it is not checked.
// Why read it straight from the API server: a cache of Leases would watch every component's
// renewals in the namespace every few seconds, to read one object now and then.
func (r *Reconciler) noLeader(ctx context.Context, ss *berthv1alpha1.SecondaryScheduler, now time.Time) string {
	if r.APIReader == nil {
		return ""
	}
	key := types.NamespacedName{Namespace: ss.Namespace, Name: LeaseName(ss)}
	l := &coordinationv1.Lease{}
	if err := r.APIReader.Get(ctx, key, l); apierrors.IsNotFound(err) {
		return fmt.Sprintf("no replica has taken Lease %s yet", key)
	} else if err != nil {
		// Not knowing is not evidence of a problem: keep the replicas' word.
		log.FromContext(ctx).Info("cannot read the scheduler's Lease", "lease", key.String(), "error", err.Error())
		return ""
	}
	return leaseProblem(l, key.String(), now)
}

// leaseProblem is noLeader's verdict on a Lease read at now.
func leaseProblem(l *coordinationv1.Lease, key string, now time.Time) string {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return fmt.Sprintf("Lease %s has no holder", key)
	}
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return fmt.Sprintf("Lease %s held by %s was never renewed", key, *l.Spec.HolderIdentity)
	}
	expiry := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	if now.After(expiry) {
		return fmt.Sprintf("Lease %s held by %s expired %s ago (last renewed %s)", key, *l.Spec.HolderIdentity,
			now.Sub(expiry).Round(time.Second), l.Spec.RenewTime.UTC().Format(time.RFC3339))
	}
	return ""
}

func set(status *berthv1alpha1.SecondarySchedulerStatus, t string, ok bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: status.ObservedGeneration})
}
