package sysched

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// examplesDir is examples/sysched at the repository root; tests run in e2e/suites/sysched.
const examplesDir = "../../../examples/sysched"

// schedulerConfig is examples/sysched/scheduler-config.yaml's profile (SySched at PreScore,
// Score and Reserve with the default weight, full profile default/all-syscalls) under a
// profile name of the test's choosing.
func schedulerConfig(schedulerName string) string {
	return framework.SchedulerConfig(framework.SySchedProfile(schedulerName, "all-syscalls"))
}

// loadDocs reads every YAML document of an example file.
func loadDocs(t *testing.T, file string) []map[string]any {
	t.Helper()
	docs, err := framework.ReadYAMLDocs(filepath.Join(examplesDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func gvrOf(obj *unstructured.Unstructured) schema.GroupVersionResource {
	gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
	return gv.WithResource(strings.ToLower(obj.GetKind()) + "s")
}

// applySPO creates an SPO object (SeccompProfile or ProfileBinding); namespace "" keeps the
// object's own scope, anything else moves it there.
func applySPO(ctx context.Context, t *testing.T, dyn dynamic.Interface, m map[string]any, namespace string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: m}
	if namespace != "" {
		obj.SetNamespace(namespace)
	}
	if err := framework.CreateUnstructured(ctx, dyn, obj); err != nil {
		t.Fatal(err)
	}
}

// applyWorkload creates the Deployment and Service of an example file in ns.
func applyWorkload(ctx context.Context, t *testing.T, c *cluster.Cluster, file, ns string) *appsv1.Deployment {
	t.Helper()
	var dep *appsv1.Deployment
	for _, m := range loadDocs(t, file) {
		raw, _ := yaml.Marshal(m)
		switch m["kind"] {
		case "Deployment":
			dep = &appsv1.Deployment{}
			if err := yaml.UnmarshalStrict(raw, dep); err != nil {
				t.Fatal(err)
			}
			// The seed's manifests, placed on the suite's simulated nodes.
			dep.Spec.Template.Spec.Tolerations = cluster.TolerateSimulated(dep.Spec.Template.Spec.Tolerations)
			if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "Service":
			svc := &corev1.Service{}
			if err := yaml.UnmarshalStrict(raw, svc); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dep == nil {
		t.Fatalf("%s has no Deployment", file)
	}
	return dep
}

// seedSequence applies the seed's four Deployments in order, each bound before the next is
// created (the order decides the placement), and returns pod name prefix → node.
func seedSequence(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) map[string]string {
	t.Helper()
	placed := map[string]string{}
	for _, app := range []string{"nginx1", "redis1", "nginx2", "memcached1"} {
		applyWorkload(ctx, t, c, app+".yaml", ns)
		pods, err := framework.WaitPods(ctx, c.Client, ns, "app="+app, 1, 2*time.Minute, framework.Bound)
		if err != nil {
			t.Fatal(err)
		}
		placed[app] = pods[0].Spec.NodeName
		t.Logf("%s → %s", pods[0].Name, placed[app])
	}
	return placed
}

// checkSeedPlacement asserts the seed's outcome: the two nginx pods share a node, redis and
// memcached share the other.
func checkSeedPlacement(t *testing.T, placed map[string]string) {
	t.Helper()
	if placed["nginx1"] != placed["nginx2"] || placed["redis1"] != placed["memcached1"] || placed["nginx1"] == placed["redis1"] {
		t.Errorf("placement %v: want nginx1+nginx2 on one node, redis1+memcached1 on the other", placed)
	}
}

// waitEvent waits for an event with reason about pod and returns its note.
func waitEvent(ctx context.Context, c *cluster.Cluster, pod *corev1.Pod, reason string, timeout time.Duration) (string, error) {
	var note string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.Client.EventsV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Regarding.UID == pod.UID && e.Reason == reason {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("no %s event for pod %s: %w", reason, pod.Name, err)
	}
	return note, nil
}

// localhost is a Localhost seccomp profile reference in SPO's cluster-scoped path layout.
func localhost(path string) *corev1.SeccompProfile {
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &path}
}

// waitSchedulable waits until the nodes carry no NoSchedule/NoExecute taint. Ready is not
// enough: the controller-manager lifts the not-ready taint a moment later, and a pod scheduled
// in between would see only some of the nodes.
func waitSchedulable(ctx context.Context, t *testing.T, c *cluster.Cluster, nodes ...string) {
	t.Helper()
	if err := framework.WaitUntainted(ctx, c.Client, nodes...); err != nil {
		t.Fatal(err)
	}
	// The scheduler learns of the change through its node informer; give the watch event a
	// moment to arrive (a delay, not an assertion on time).
	time.Sleep(500 * time.Millisecond)
}

// addSeedNodes adds the seed's two nodes, mynode-1 and mynode-2, and waits until pods can be
// scheduled on both.
func addSeedNodes(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if err := c.AddNodes(ctx,
		cluster.NodeSpec{Name: "mynode-1", CPU: "4", Memory: "16Gi"},
		cluster.NodeSpec{Name: "mynode-2", CPU: "4", Memory: "16Gi"}); err != nil {
		t.Fatal(err)
	}
	waitSchedulable(ctx, t, c, "mynode-1", "mynode-2")
}
