package placement

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/berth-sched/berth/e2e/framework"
)

// workloads applies wave w's changes to the scenario's controllers: new workloads are created,
// running ones scaled, rolled to their new template, or deleted. The controllers
// (kube-controller-manager) make the pods, so they carry owner references and template hashes as
// in a cluster.
func (x *replay) workloads(ctx context.Context, w int) {
	ws := x.sc.Workloads
	_ = parallel(ctx, 8, len(ws), func(i int) error {
		if err := x.applyWorkload(ctx, &ws[i], w); err != nil {
			x.note("workload", fmt.Sprintf("changing workloads failed (first: %v)", err))
		}
		return nil
	})
}

// applyWorkload is one workload's change at wave w, if it has one.
func (x *replay) applyWorkload(ctx context.Context, ws *WorkloadSpec, w int) error {
	apps := x.c.Client.AppsV1()
	bg := metav1.DeletePropagationBackground
	switch {
	case w == ws.Arrive:
		var err error
		if ws.Kind == KindStatefulSet {
			_, err = apps.StatefulSets(x.ns).Create(ctx, statefulSetObject(x.ns, x.schedName, ws, w), metav1.CreateOptions{})
		} else {
			_, err = apps.Deployments(x.ns).Create(ctx, deploymentObject(x.ns, x.schedName, ws, w), metav1.CreateOptions{})
		}
		return err
	case w < ws.Arrive || (ws.Leave >= 0 && w > ws.Leave):
		return nil
	case w == ws.Leave:
		del := metav1.DeleteOptions{PropagationPolicy: &bg}
		if ws.Kind == KindStatefulSet {
			return apps.StatefulSets(x.ns).Delete(ctx, ws.Name, del)
		}
		return apps.Deployments(x.ns).Delete(ctx, ws.Name, del)
	case ws.replicasAt(w) == ws.replicasAt(w-1) && ws.revisionAt(w) == ws.revisionAt(w-1):
		return nil
	}
	// A scale-up or a rollout: the controller object as the scenario wants it after wave w,
	// written over the live one (its resourceVersion kept; the controller writes its status
	// meanwhile, hence the retry on conflict).
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return x.updateWorkload(ctx, ws, w) })
}

// updateWorkload writes the workload's replicas and template after wave w over the live object.
func (x *replay) updateWorkload(ctx context.Context, ws *WorkloadSpec, w int) error {
	apps := x.c.Client.AppsV1()
	if ws.Kind == KindStatefulSet {
		cur, err := apps.StatefulSets(x.ns).Get(ctx, ws.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := statefulSetObject(x.ns, x.schedName, ws, w)
		cur.Spec.Replicas, cur.Spec.Template = want.Spec.Replicas, want.Spec.Template
		_, err = apps.StatefulSets(x.ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}
	cur, err := apps.Deployments(x.ns).Get(ctx, ws.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := deploymentObject(x.ns, x.schedName, ws, w)
	cur.Spec.Replicas, cur.Spec.Template = want.Spec.Replicas, want.Spec.Template
	_, err = apps.Deployments(x.ns).Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// template is the workload's pod template at wave w: its requests, CPU limit, the scheduler, and
// the revision label that a rollout changes (so the pods get a new template hash).
func template(schedulerName string, ws *WorkloadSpec, w int) (map[string]string, corev1.PodTemplateSpec) {
	spec := framework.PodSpec(schedulerName, strconv.FormatInt(ws.ReqMilliCPU, 10)+"m", strconv.FormatInt(ws.ReqMemMiB, 10)+"Mi")
	if ws.LimMilliCPU > 0 {
		spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(ws.LimMilliCPU, resource.DecimalSI)}
	}
	sel := map[string]string{"app": "placement", labelWorkload: ws.Name}
	labels := map[string]string{"app": "placement", labelWorkload: ws.Name, "class": ws.Class, labelRevision: strconv.Itoa(ws.revisionAt(w))}
	return sel, corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
}

func deploymentObject(ns, schedulerName string, ws *WorkloadSpec, w int) *appsv1.Deployment {
	sel, tmpl := template(schedulerName, ws, w)
	n := int32(ws.replicasAt(w))
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ws.Name, Labels: sel},
		Spec: appsv1.DeploymentSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: tmpl}}
}

// statefulSetObject starts its pods in parallel: one at a time (the default) would spread a
// 30-replica workload over minutes of the compressed timeline.
func statefulSetObject(ns, schedulerName string, ws *WorkloadSpec, w int) *appsv1.StatefulSet {
	sel, tmpl := template(schedulerName, ws, w)
	n := int32(ws.replicasAt(w))
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ws.Name, Labels: sel},
		Spec: appsv1.StatefulSetSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: tmpl,
			ServiceName: ws.Name, PodManagementPolicy: appsv1.ParallelPodManagement}}
}
