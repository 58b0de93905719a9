package demo

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

func init() {
	register(40, Scenario{Name: "InstanceIsolation: each instance class gets nodes of its own; an InstanceClass shares one across namespaces (IPP)", Run: isolationDemo})
}

// isolationDemo: two KWOK nodes labelled and tainted as IPP's pool, classes tenant-a and
// tenant-b with pods in two namespaces (a class belongs to its pods' namespace, so each is
// shared by an InstanceClass listing both), then a third class that finds no node of its own and
// waits Pending until the scenario adds a pool node (what Cluster Autoscaler would do).
func isolationDemo(ctx context.Context, env *Env) error {
	const (
		schedulerName = "berth-isolation"
		pool          = "berth.io/demo-isolation"
	)
	namespaces := []string{"demo-iso-a", "demo-iso-b"}
	node := func(name string) cluster.NodeSpec {
		return cluster.NodeSpec{Name: name, CPU: "4", Memory: "16Gi", Labels: map[string]string{pool: "true"},
			Taints: []corev1.Taint{{Key: pool, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	}
	if err := env.Cluster.AddNodes(ctx, node("iso-node-1"), node("iso-node-2")); err != nil {
		return err
	}
	profiles, err := framework.InstanceIsolationProfiles(schedulerName, "", 10, configv1.InstanceIsolationArgs{})
	if err != nil {
		return err
	}
	// why: created before the scheduler, whose first cycle waits for its InstanceClass informer.
	for _, class := range []string{"tenant-a", "tenant-b"} {
		remove, err := framework.ApplyInstanceClass(ctx, env.Cluster.RESTConfig, class, namespaces...)
		if err != nil {
			return err
		}
		defer remove()
	}
	sched, ec, err := startRecording(ctx, env.Cluster, "berth-scheduler-isolation", framework.SchedulerConfig(profiles))
	if err != nil {
		return err
	}
	defer env.Cluster.StopComponent(sched.Process)
	for _, ns := range namespaces {
		if err := framework.EnsureNamespace(ctx, env.Client, ns); err != nil {
			return err
		}
	}
	// Pods are written with a class label only: the instance-isolation webhook (mode berth)
	// adds berth's schedulerName, the pool toleration and node affinity.
	wcfg := webhook.Defaults()
	wcfg.SchedulerName, wcfg.PoolLabel, wcfg.TaintKey = schedulerName, pool, pool
	wcfg.Classes = webhook.StaticGrants{"tenant-a": namespaces, "tenant-b": namespaces}
	stopWebhook, err := startIsolationWebhook(ctx, env, wcfg, namespaces)
	if err != nil {
		return err
	}
	defer stopWebhook()
	created, err := createIsolationPods(ctx, env, namespaces, wcfg)
	if err != nil {
		return err
	}
	if err := waitAllBound(ctx, env, created, time.Minute); err != nil {
		return err
	}
	late, err := isolationPod(ctx, env, namespaces[0], "tenant-c-0", "tenant-c")
	if err != nil {
		return err
	}
	ev, err := framework.WaitSchedulingEvent(ctx, env.Client, late, "FailedScheduling", time.Minute)
	if err != nil {
		return fmt.Errorf("tenant-c-0 should wait for a node of its own: %w", err)
	}
	if err := printIsolation(ctx, env, append(created, late)); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "\ntenant-c-0 is Pending: %s\n", ev.Note)
	// Each node's verdict, from the running scheduler's decision record.
	if _, err := printDecision(ctx, env, ec, late.Namespace, late.Name); err != nil {
		return err
	}
	fmt.Fprintln(env.Out, "adding pool node iso-node-3 (as Cluster Autoscaler would) ...")
	if err := env.Cluster.AddNodes(ctx, node("iso-node-3")); err != nil {
		return err
	}
	if err := waitAllBound(ctx, env, []*corev1.Pod{late}, time.Minute); err != nil {
		return err
	}
	fmt.Fprintln(env.Out)
	return printIsolation(ctx, env, append(created, late))
}

// createIsolationPods writes three pods of each of classes tenant-a and tenant-b, alternating
// between the namespaces (which their InstanceClasses share them with), and shows what the
// webhook added to the first.
func createIsolationPods(ctx context.Context, env *Env, namespaces []string, wcfg webhook.Config) ([]*corev1.Pod, error) {
	var created []*corev1.Pod
	for i := 0; i < 6; i++ {
		class := []string{"tenant-a", "tenant-b"}[i%2]
		p, err := isolationPod(ctx, env, namespaces[(i/2)%2], fmt.Sprintf("%s-%d", class, i/2), class)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			fmt.Fprintf(env.Out, "%s/%s written with %s=%s only; the webhook added: %s\n\n", p.Namespace, p.Name, framework.ClassLabel, class, describeMutation(p, wcfg))
		}
		created = append(created, p)
	}
	return created, nil
}

// isolationPod creates a pod carrying only a class label; the webhook adds the rest.
func isolationPod(ctx context.Context, env *Env, ns, name, class string) (*corev1.Pod, error) {
	return env.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, name, map[string]string{framework.ClassLabel: class, "demo": "isolation"},
		framework.PodSpec("", "100m", "64Mi")), createOpts)
}

func waitAllBound(ctx context.Context, env *Env, pods []*corev1.Pod, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := env.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
}

// printIsolation reads the pods back and prints namespace, pod, class and node.
func printIsolation(ctx context.Context, env *Env, pods []*corev1.Pod) error {
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tCLASS\tNODE")
	for _, p := range pods {
		got, err := env.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node := got.Spec.NodeName
		if node == "" {
			node = "<Pending>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", got.Namespace, got.Name, got.Labels[framework.ClassLabel], node)
	}
	return tw.Flush()
}
