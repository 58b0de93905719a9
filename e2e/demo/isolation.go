package demo

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"k8s.io/client-go/dynamic"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

func init() {
	register(40, Scenario{Name: "InstanceIsolation: each instance class gets nodes of its own; an InstanceClass shares one across namespaces (IPP)", Run: isolationDemo})
}

// isolationDemo: two KWOK nodes labelled and tainted as IPP's pool, classes tenant-a and
// tenant-b with pods in two namespaces (a class belongs to its pods' namespace, so each is
// shared by an InstanceClass listing both), then a third class that finds no node of its own:
// Karpenter (the real autoscaler, its KWOK provider) sees it Pending and makes a node for it,
// because the webhook's marker terms tell its simulation that no node of another class fits.
func isolationDemo(ctx context.Context, env *Env) error {
	namespaces := []string{"demo-iso-a", "demo-iso-b"}
	if err := env.Cluster.AddNodes(ctx, isoNode("iso-node-1"), isoNode("iso-node-2")); err != nil {
		return err
	}
	stopKarpenter, err := startDemoAutoscaler(ctx, env)
	if err != nil {
		return err
	}
	defer stopKarpenter()
	profiles, err := framework.InstanceIsolationProfiles(isoScheduler, "", 10, configv1.InstanceIsolationArgs{})
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
	sched, ec, err := startRecording(ctx, env, env.Cluster, "berth-scheduler-isolation", framework.SchedulerConfig(profiles))
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
	// adds berth's schedulerName, the pool toleration and node affinity with the marker terms;
	// the operator's marker writer labels each node with the class it holds.
	wcfg := webhook.Defaults()
	wcfg.SchedulerName, wcfg.PoolLabel, wcfg.TaintKey = isoScheduler, isoPool, isoPool
	wcfg.Classes = webhook.StaticGrants{"tenant-a": namespaces, "tenant-b": namespaces}
	stop, err := startIsolationAdmission(ctx, env, wcfg, namespaces)
	if err != nil {
		return err
	}
	defer stop()
	created, err := createIsolationPods(ctx, env, namespaces, wcfg)
	if err != nil {
		return err
	}
	if err := waitAllBound(ctx, env, created, time.Minute); err != nil {
		return err
	}
	if err := waitMarkers(ctx, env, map[string]string{"iso-node-1": "tenant-a", "iso-node-2": "tenant-b"}); err != nil {
		return err
	}
	late, err := waitForOwnNode(ctx, env, ec, namespaces[0], append([]*corev1.Pod(nil), created...))
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Out)
	all := append(created, late)
	if err := printIsolation(ctx, env, all); err != nil {
		return err
	}
	return checkIsolation(ctx, env, all, late)
}

const (
	isoScheduler = "berth-isolation"
	isoPool      = "berth.io/demo-isolation"
	// isoNodePool is Karpenter's NodePool for the demo's pool.
	isoNodePool = "demo-isolation"
)

func isoNode(name string) cluster.NodeSpec {
	return cluster.NodeSpec{Name: name, CPU: "4", Memory: "16Gi", Labels: map[string]string{isoPool: "true"},
		Taints: []corev1.Taint{isoTaint}}
}

var isoTaint = corev1.Taint{Key: isoPool, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// startDemoAutoscaler runs Karpenter beside the cluster with a NodePool for the demo's pool
// (its label and taint, the marker requirement, WhenEmpty); stop removes its nodes and ends it.
func startDemoAutoscaler(ctx context.Context, env *Env) (stop func(), err error) {
	if _, err := env.Cluster.StartKarpenter(ctx, cluster.KarpenterOptions{}); err != nil {
		return nil, err
	}
	stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := env.Cluster.StopKarpenter(sctx); err != nil {
			fmt.Fprintf(env.Out, "stopping Karpenter: %v\n", err)
		}
	}
	dyn, err := dynamic.NewForConfig(env.Cluster.RESTConfig)
	if err != nil {
		stop()
		return nil, err
	}
	np := cluster.IsolationNodePool(isoNodePool,
		corev1.NodeSelectorRequirement{Key: isoPool, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}, isoTaint, 10*time.Second)
	if _, err := dyn.Resource(cluster.NodePoolGVR).Create(ctx, cluster.NodePoolObject(np), metav1.CreateOptions{}); err != nil {
		stop()
		return nil, fmt.Errorf("creating NodePool %s: %w", isoNodePool, err)
	}
	return stop, nil
}

// waitForOwnNode creates tenant-c-0, a class with no node of its own, shows why berth-scheduler
// keeps it Pending (its event and decision record), and waits until it runs on the node
// Karpenter made for it.
func waitForOwnNode(ctx context.Context, env *Env, ec *framework.ExplainClient, ns string, before []*corev1.Pod) (*corev1.Pod, error) {
	late, err := isolationPod(ctx, env, ns, "tenant-c-0", "tenant-c")
	if err != nil {
		return nil, err
	}
	ev, err := framework.WaitSchedulingEvent(ctx, env.Client, late, "FailedScheduling", time.Minute)
	if err != nil {
		return nil, fmt.Errorf("tenant-c-0 should wait for a node of its own: %w", err)
	}
	if err := printIsolation(ctx, env, append(before, late)); err != nil {
		return nil, err
	}
	fmt.Fprintf(env.Out, "\ntenant-c-0 is Pending: %s\n", ev.Note)
	// Each node's verdict, from the running scheduler's decision record.
	if _, err := printDecision(ctx, env, ec, late.Namespace, late.Name); err != nil {
		return nil, err
	}
	fmt.Fprintln(env.Out, "Karpenter (NodePool "+isoNodePool+") sees tenant-c-0 Pending and makes a node for its class ...")
	if err := waitAllBound(ctx, env, []*corev1.Pod{late}, 3*time.Minute); err != nil {
		return nil, fmt.Errorf("tenant-c-0 got no node from Karpenter in 3m (its log: logs/karpenter.log): %w", err)
	}
	got, err := env.Client.CoreV1().Pods(late.Namespace).Get(ctx, late.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	bound := got.CreationTimestamp.Time
	for _, c := range got.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			bound = c.LastTransitionTime.Time
		}
	}
	fmt.Fprintf(env.Out, "tenant-c-0 bound to %s %s after it was created (pod's PodScheduled condition)\n",
		got.Spec.NodeName, bound.Sub(got.CreationTimestamp.Time).Round(time.Second))
	return got, nil
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

// printIsolation reads the pods and their nodes back and prints namespace, pod, class, node,
// the node's autoscaler marker and the NodePool that made it (empty: made by hand).
func printIsolation(ctx context.Context, env *Env, pods []*corev1.Pod) error {
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tCLASS\tNODE\tNODE MARKER\tNODEPOOL")
	for _, p := range pods {
		got, err := env.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node, marker, pool := got.Spec.NodeName, "", ""
		if node == "" {
			node = "<Pending>"
		} else if n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
			marker, pool = n.Labels[classmarker.Key], n.Labels[cluster.KarpenterNodePoolLabel]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", got.Namespace, got.Name, got.Labels[framework.ClassLabel], node, dash(marker), dash(pool))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// waitMarkers waits until the marker writer has labelled each node with its class's marker
// (the demo's classes there are shared by InstanceClasses).
func waitMarkers(ctx context.Context, env *Env, want map[string]string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for node, class := range want {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			v := classmarker.MarkerValue(classmarker.SharedClass(class))
			if got := n.Labels[classmarker.Key]; got != v {
				last = fmt.Sprintf("node %s carries %s=%q, want %q", node, classmarker.Key, got, v)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the marker writer did not mark the class nodes: %s: %w", last, err)
	}
	return nil
}

// checkIsolation holds the scenario to seed 002's promise, read back from the API server: no
// node holds pods of two classes, no pod carries an anti-affinity term (berth mode), and the
// late class runs on a node Karpenter made for it, marked with its class.
func checkIsolation(ctx context.Context, env *Env, pods []*corev1.Pod, late *corev1.Pod) error {
	classes := map[string]map[string]bool{}
	for _, p := range pods {
		got, err := env.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if a := got.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			return fmt.Errorf("pod %s/%s carries a pod anti-affinity term; mode berth writes none", got.Namespace, got.Name)
		}
		// tenant-a and tenant-b are shared by their InstanceClasses; tenant-c is its namespace's.
		class := got.Labels[framework.ClassLabel]
		eff := classmarker.Effective(got.Namespace, class, class != "tenant-c")
		if classes[got.Spec.NodeName] == nil {
			classes[got.Spec.NodeName] = map[string]bool{}
		}
		classes[got.Spec.NodeName][eff] = true
	}
	for node, cs := range classes {
		if len(cs) > 1 {
			return fmt.Errorf("node %s holds pods of %d classes %v: seed 002 promises one class per node", node, len(cs), cs)
		}
	}
	n, err := env.Client.CoreV1().Nodes().Get(ctx, late.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if n.Labels[cluster.KarpenterNodePoolLabel] != isoNodePool {
		return fmt.Errorf("tenant-c-0 runs on %s, which NodePool %s did not make (labels %v)", n.Name, isoNodePool, n.Labels)
	}
	want := classmarker.MarkerValue(classmarker.Effective(late.Namespace, "tenant-c", false))
	if got := n.Labels[classmarker.Key]; got != want {
		return fmt.Errorf("node %s made for tenant-c carries marker %s=%q, want %q", n.Name, classmarker.Key, got, want)
	}
	fmt.Fprintf(env.Out, "\nchecked: one class per node, no anti-affinity term, tenant-c on Karpenter's node %s marked %s=%s\n", n.Name, classmarker.Key, want)
	return nil
}
