package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// These tests run bin/karpenter (Karpenter's KWOK provider, `make tools`) beside the cluster.

// testConsolidateAfter is short so a test does not wait ten minutes; a disruption loop adds up
// to about a minute on top of it.
const (
	testConsolidateAfter = 10 * time.Second
	disruptionSlack      = 60 * time.Second
)

func startKarpenterCluster(t *testing.T) (*Cluster, dynamic.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if _, err := c.StartKarpenter(ctx, KarpenterOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return c, dyn
}

func createNodePool(t *testing.T, dyn dynamic.Interface, s NodePoolSpec) {
	t.Helper()
	if _, err := dyn.Resource(NodePoolGVR).Create(context.Background(), NodePoolObject(s), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating NodePool %s: %v", s.Name, err)
	}
}

func smallPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
		},
	}
}

// createPod creates p, waiting out a fresh cluster's missing default ServiceAccount (the
// controller-manager makes it a moment after the namespace exists).
func createPod(t *testing.T, c *Cluster, p *corev1.Pod) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("creating pod %s: %v", p.Name, last)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPodsRunning waits until every named pod in default is Running on a Ready node and
// returns pod -> node.
func waitPodsRunning(t *testing.T, c *Cluster, names []string, timeout time.Duration) map[string]string {
	t.Helper()
	ctx := context.Background()
	placed := map[string]string{}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
				last = fmt.Sprintf("pod %s: phase %s node %q", n, p.Status.Phase, p.Spec.NodeName)
				return false, nil
			}
			node, err := c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				last = fmt.Sprintf("node %s of pod %s not Ready", p.Spec.NodeName, n)
				return false, nil
			}
			placed[n] = p.Spec.NodeName
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods %v not all Running on Ready nodes after %s: %s\n--- karpenter.log ---\n%s", names, timeout, last,
			tailFile(c.logDir()+"/karpenter.log", 40))
	}
	return placed
}

// TestKarpenterScalesUpAndDown: a pending default-scheduler pod that only the autoscaled pool
// can take gets a NodeClaim and a Ready KWOK node; once the pod is gone the node is removed
// within consolidateAfter plus a disruption loop; StopKarpenter leaves no NodeClaim or node.
func TestKarpenterScalesUpAndDown(t *testing.T) {
	c, dyn := startKarpenterCluster(t)
	ctx := context.Background()
	createNodePool(t, dyn, AutoscaledNodePool("autoscaled", true, testConsolidateAfter))

	pod := smallPod("wants-a-node")
	pod.Spec.NodeSelector = map[string]string{AutoscaledPoolLabel: "true"}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: AutoscaledPoolLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	createPod(t, c, pod)
	start := time.Now()
	placed := waitPodsRunning(t, c, []string{pod.Name}, 2*time.Minute)
	t.Logf("pod Running on %s after %s", placed[pod.Name], time.Since(start).Round(time.Second))
	claims, err := NodeClaims(ctx, dyn, "autoscaled")
	if err != nil || len(claims) != 1 {
		t.Fatalf("want 1 NodeClaim of pool autoscaled, got %v (%v)", claims, err)
	}
	node, err := c.Client.CoreV1().Nodes().Get(ctx, placed[pod.Name], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[KarpenterNodePoolLabel] != "autoscaled" || node.Labels[AutoscaledPoolLabel] != "true" || node.Annotations[KWOKNodeAnnotation] != "fake" {
		t.Errorf("node %s: want Karpenter's (nodepool autoscaled), the pool label and KWOK's annotation; labels %v annotations %v",
			node.Name, node.Labels, node.Annotations)
	}

	if err := c.Client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	limit := testConsolidateAfter + disruptionSlack
	err = wait.PollUntilContextTimeout(ctx, time.Second, limit, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), nil
	})
	if err != nil {
		t.Fatalf("empty node %s still there %s after its pod went (consolidateAfter %s)\n--- karpenter.log ---\n%s",
			node.Name, limit, testConsolidateAfter, tailFile(c.logDir()+"/karpenter.log", 40))
	}
	t.Logf("empty node removed %s after its pod was deleted", time.Since(deleted).Round(time.Second))

	// A second node, left for the teardown to remove.
	pod2 := pod.DeepCopy()
	pod2.ObjectMeta = metav1.ObjectMeta{Name: "left-for-teardown", Namespace: "default"}
	createPod(t, c, pod2)
	waitPodsRunning(t, c, []string{pod2.Name}, 2*time.Minute)
	if err := c.StopKarpenter(ctx); err != nil {
		t.Fatalf("StopKarpenter: %v", err)
	}
	if left, _ := NodeClaims(ctx, dyn, "autoscaled"); len(left) != 0 {
		t.Errorf("NodeClaims left after StopKarpenter: %v", left)
	}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: KarpenterNodePoolLabel})
	if err != nil || len(nodes.Items) != 0 {
		t.Errorf("Karpenter's nodes left after StopKarpenter: %d (%v)", len(nodes.Items), err)
	}
	for _, p := range c.Processes() {
		if p.Name == Karpenter {
			t.Errorf("karpenter (pid %d) still managed after StopKarpenter", p.PID())
		}
	}
}

// TestKarpenterMarkerTermsMakeOneClaimPerClass validates marker-design.md against the real
// Karpenter: a pod whose first required node-selector term asks for marker In [x] (and whose
// second asks DoesNotExist) gets a NodeClaim and node labelled x, and pods of three different
// values get three NodeClaims, never one shared.
func TestKarpenterMarkerTermsMakeOneClaimPerClass(t *testing.T) {
	c, dyn := startKarpenterCluster(t)
	ctx := context.Background()
	poolLabel := corev1.NodeSelectorRequirement{Key: "berth.dev/test-pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}
	poolTaint := corev1.Taint{Key: "berth.dev/test-pool", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	createNodePool(t, dyn, IsolationNodePool("iso", poolLabel, poolTaint, testConsolidateAfter))

	values := []string{"team-a_web", "team-b_web", "shared-db"}
	var names []string
	for i, v := range values {
		p := smallPod(fmt.Sprintf("class-%d", i))
		p.Spec.Tolerations = []corev1.Toleration{{Key: poolTaint.Key, Operator: corev1.TolerationOpEqual, Value: poolTaint.Value, Effect: poolTaint.Effect}}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{poolLabel, {Key: classmarker.Key, Operator: corev1.NodeSelectorOpIn, Values: []string{v}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{poolLabel, {Key: classmarker.Key, Operator: corev1.NodeSelectorOpDoesNotExist}}},
			}},
		}}
		createPod(t, c, p)
		names = append(names, p.Name)
	}
	placed := waitPodsRunning(t, c, names, 3*time.Minute)
	claims, err := NodeClaims(ctx, dyn, "iso")
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != len(values) {
		t.Errorf("want %d NodeClaims (one per marker value), got %d: %v", len(values), len(claims), claims)
	}
	byNode := map[string][]string{}
	for i, n := range names {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, placed[n], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		byNode[node.Name] = append(byNode[node.Name], n)
		if got := node.Labels[classmarker.Key]; got != values[i] {
			t.Errorf("pod %s (marker %s) runs on %s whose marker is %q", n, values[i], node.Name, got)
		}
		if node.Labels[poolLabel.Key] != "true" || !hasTaint(node, poolTaint) {
			t.Errorf("node %s lacks the pool label or taint: labels %v taints %v", node.Name, node.Labels, node.Spec.Taints)
		}
		t.Logf("pod %s -> node %s (marker %q)", n, node.Name, node.Labels[classmarker.Key])
	}
	for node, pods := range byNode {
		if len(pods) > 1 {
			t.Errorf("node %s holds pods of several marker values: %v", node, pods)
		}
	}
}

func hasTaint(n *corev1.Node, want corev1.Taint) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == want.Key && t.Value == want.Value && t.Effect == want.Effect {
			return true
		}
	}
	return false
}

func TestLoadKarpenterCRDsRefusesEmptyDir(t *testing.T) {
	_, err := LoadKarpenterCRDs(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("want an error naming `make tools`, got %v", err)
	}
}
