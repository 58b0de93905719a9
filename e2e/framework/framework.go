// Package framework holds the helpers the end-to-end suites, the demo and the benchmarks share:
// workloads, waiting for pods, and telling which scheduler placed a pod.
package framework

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-sched/berth/e2e/cluster"
)

// PauseImage is what simulated pods "run"; KWOK never pulls it.
const PauseImage = "registry.k8s.io/pause:3.10.1"

// EnsureNamespace creates ns if it does not exist.
func EnsureNamespace(ctx context.Context, c kubernetes.Interface, ns string) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// The controller-manager creates the default ServiceAccount; pods are refused until it exists.
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// PodSpec is a minimal pod template: one container requesting cpu and memory, tolerating
// simulated nodes (cluster.SimulatedTaint).
func PodSpec(schedulerName, cpu, memory string) corev1.PodSpec {
	req := corev1.ResourceList{}
	if cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		req[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return corev1.PodSpec{
		SchedulerName:                 schedulerName,
		TerminationGracePeriodSeconds: new(int64),
		// The suites' and demo's workloads are meant for simulated nodes too.
		Tolerations: []corev1.Toleration{cluster.SimulatedToleration},
		Containers: []corev1.Container{{
			Name: "app", Image: PauseImage,
			Resources: corev1.ResourceRequirements{Requests: req},
		}},
	}
}

// Pod returns a pod named name in ns.
func Pod(ns, name string, labels map[string]string, spec corev1.PodSpec) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: spec}
}

// Deployment returns a Deployment of replicas pods with spec.
func Deployment(ns, name string, replicas int32, spec corev1.PodSpec) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// WaitPods waits until count pods match selector in ns and every one satisfies ok.
func WaitPods(ctx context.Context, c kubernetes.Interface, ns, selector string, count int, timeout time.Duration, ok func(*corev1.Pod) bool) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		pods = list.Items
		if len(pods) != count {
			return false, nil
		}
		for i := range pods {
			if !ok(&pods[i]) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return pods, fmt.Errorf("waiting for %d pods %q in %s: %w (have %s)", count, selector, ns, err, describe(pods))
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// WaitUntainted waits (up to a minute each) until the nodes carry no NoSchedule or NoExecute
// taint but cluster.SimulatedTaint. Ready is not enough: the controller-manager lifts the
// not-ready taint a moment later, and a pod scheduled in between would see only some nodes.
func WaitUntainted(ctx context.Context, c kubernetes.Interface, nodes ...string) error {
	for _, name := range nodes {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, t := range n.Spec.Taints {
				if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && t.Key != cluster.SimulatedTaint.Key {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("node %s still tainted: %w", name, err)
		}
	}
	return nil
}

// Running is a WaitPods predicate.
func Running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

// Bound is a WaitPods predicate.
func Bound(p *corev1.Pod) bool { return p.Spec.NodeName != "" }

func describe(pods []corev1.Pod) string {
	s := fmt.Sprintf("%d:", len(pods))
	for _, p := range pods {
		s += fmt.Sprintf(" %s[%s node=%q]", p.Name, p.Status.Phase, p.Spec.NodeName)
	}
	return s
}

// SchedulingEvent is the event a scheduler records about a pod.
type SchedulingEvent struct {
	Reason string // Scheduled or FailedScheduling
	// Scheduler is the reporting controller: the profile's schedulerName.
	Scheduler string
	Note      string
}

// SchedulingEvents returns the scheduling events recorded about each pod in ns, by pod UID.
func SchedulingEvents(ctx context.Context, c kubernetes.Interface, ns string) (map[types.UID][]SchedulingEvent, error) {
	list, err := c.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[types.UID][]SchedulingEvent{}
	for _, e := range list.Items {
		if e.Regarding.Kind != "Pod" || (e.Reason != "Scheduled" && e.Reason != "FailedScheduling") {
			continue
		}
		out[e.Regarding.UID] = append(out[e.Regarding.UID], SchedulingEvent{Reason: e.Reason, Scheduler: reporter(&e), Note: e.Note})
	}
	return out, nil
}

func reporter(e *eventsv1.Event) string {
	if e.ReportingController != "" {
		return e.ReportingController
	}
	return e.DeprecatedSource.Component
}

// WaitSchedulingEvent waits until pod has an event with reason and returns it.
func WaitSchedulingEvent(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, reason string, timeout time.Duration) (SchedulingEvent, error) {
	var found SchedulingEvent
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		events, err := SchedulingEvents(ctx, c, pod.Namespace)
		if err != nil {
			return false, nil
		}
		for _, e := range events[pod.UID] {
			if e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return found, fmt.Errorf("no %s event for pod %s/%s: %w", reason, pod.Namespace, pod.Name, err)
	}
	return found, nil
}
