// Package imagelocality runs NodeImageLocality end to end: the real control plane with KWOK
// nodes (whose node.status.images is empty, as on kind), NodeImages objects written by the
// test as the agents would, and the real berth-scheduler binary.
package imagelocality

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

const (
	schedulerName = "berth-scheduler"
	ns            = "imagelocality"
	suiteLabel    = "berth-e2e-imagelocality"
	mib           = int64(1 << 20)
	digestX       = "sha256:4c0fdaa8b6341bfdeca5f18f7837462c80cff90527ee35ef185571e1c327beac"
	digestY       = "sha256:" + "2222222222222222222222222222222222222222222222222222222222222222"
)

type env struct {
	c   *cluster.Cluster
	dyn dynamic.Interface
}

// TestNodeImageLocality runs every case on one cluster and one berth-scheduler whose profile
// ranks feasible nodes by NodeImageLocality alone (seed 004's configuration, with the plugin
// instead of the in-tree ImageLocality). Each case has its own nodes, selected by label.
func TestNodeImageLocality(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{})
	if err := framework.InstallNodeImagesCRD(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{
		Config: framework.SchedulerConfig(framework.NodeImageLocalityProfile(schedulerName, 100, true, "{assumePulledFor: 5m}")),
	}); err != nil {
		t.Fatal(err)
	}
	e := &env{c: c, dyn: dyn}

	t.Run("seed 004: busybox pods land on the two nodes that hold busybox", func(t *testing.T) {
		nodes := e.nodes(ctx, t, "seed", "scheduler-worker", "scheduler-worker2", "scheduler-worker3")
		busybox := framework.NodeImage{Tags: []string{"docker.io/library/busybox:latest"},
			Digests: []string{"docker.io/library/busybox@" + digestX}, Size: 771_000}
		e.images(ctx, t, nodes[1], busybox)
		e.images(ctx, t, nodes[2], busybox)
		var pods []*corev1.Pod
		for i := 0; i < 6; i++ {
			pods = append(pods, e.pod(ctx, t, "seed", fmt.Sprintf("busybox-sleep-%d", i), "", "busybox"))
		}
		for _, p := range pods {
			if got := e.bound(ctx, t, p); got == nodes[0] {
				t.Errorf("%s went to %s, which does not hold busybox", p.Name, got)
			}
		}
	})

	t.Run("short and fully-qualified names match the runtime's name", func(t *testing.T) {
		nodes := e.nodes(ctx, t, "names", "names-1", "names-2", "names-3")
		e.images(ctx, t, nodes[0], framework.NodeImage{Tags: []string{"docker.io/library/nginx:1.16"}, Size: 2000 * mib})
		e.images(ctx, t, nodes[1], framework.NodeImage{Tags: []string{"docker.io/library/nginx:1.17"}, Size: 2000 * mib})
		for i, ref := range []string{"nginx:1.16", "library/nginx:1.16", "docker.io/nginx:1.16", "docker.io/library/nginx:1.16"} {
			if got := e.bound(ctx, t, e.pod(ctx, t, "names", fmt.Sprintf("n116-%d", i), "", ref)); got != nodes[0] {
				t.Errorf("%s → %s, want %s (holds docker.io/library/nginx:1.16)", ref, got, nodes[0])
			}
		}
		if got := e.bound(ctx, t, e.pod(ctx, t, "names", "n117", "", "nginx:1.17")); got != nodes[1] {
			t.Errorf("nginx:1.17 → %s, want %s", got, nodes[1])
		}
	})

	t.Run("digest pins match the digest, not the tag", func(t *testing.T) {
		nodes := e.nodes(ctx, t, "digest", "digest-1", "digest-2", "digest-3")
		// The tag moved: digest-1 has 1.16 at X, digest-2 has 1.16 at Y.
		e.images(ctx, t, nodes[0], framework.NodeImage{Tags: []string{"docker.io/library/nginx:1.16"}, Digests: []string{"docker.io/library/nginx@" + digestX}, Size: 2000 * mib})
		e.images(ctx, t, nodes[1], framework.NodeImage{Tags: []string{"docker.io/library/nginx:1.16"}, Digests: []string{"docker.io/library/nginx@" + digestY}, Size: 2000 * mib})
		cases := map[string]string{"nginx@" + digestX: nodes[0], "nginx:1.16@" + digestY: nodes[1], "docker.io/library/nginx@" + digestY: nodes[1]}
		i := 0
		for ref, want := range cases {
			i++
			if got := e.bound(ctx, t, e.pod(ctx, t, "digest", fmt.Sprintf("pin-%d", i), "", ref)); got != want {
				t.Errorf("%s → %s, want %s", ref, got, want)
			}
		}
	})

	t.Run("a just-bound pod's image counts on its node for the next pods", func(t *testing.T) {
		// pull-3 alone holds the image (so its size is known); the pods may only use pull-1 and
		// pull-2, where nothing holds it. Without the accounting each next pod is a coin toss.
		nodes := e.nodes(ctx, t, "pull", "pull-1", "pull-2", "pull-3")
		e.images(ctx, t, nodes[2], framework.NodeImage{Tags: []string{"quay.io/berth/ml:1"}, Size: 3000 * mib})
		only := nodes[:2]
		// Placed by berth-scheduler (Reserve path): the first lands on either.
		first := e.bound(ctx, t, e.podOn(ctx, t, "pull", "ml-0", "", "quay.io/berth/ml:1", only))
		for i := 1; i <= 5; i++ {
			if got := e.bound(ctx, t, e.podOn(ctx, t, "pull", fmt.Sprintf("ml-%d", i), "", "quay.io/berth/ml:1", only)); got != first {
				t.Errorf("ml-%d → %s, want %s where ml-0 is pulling the image", i, got, first)
			}
		}
		// Placed by someone else (spec.nodeName set, no scheduler: pod informer path).
		e.images(ctx, t, nodes[2], framework.NodeImage{Tags: []string{"quay.io/berth/ml:1"}, Size: 3000 * mib},
			framework.NodeImage{Tags: []string{"quay.io/berth/ml:2"}, Size: 3000 * mib})
		other := nodes[0]
		if first == nodes[0] {
			other = nodes[1] // the node that did not get the ml:1 pods, so ml:1 pulls do not help it
		}
		e.bound(ctx, t, e.pod(ctx, t, "pull", "ml2-direct", other, "quay.io/berth/ml:2"))
		for i := 1; i <= 5; i++ {
			if got := e.bound(ctx, t, e.podOn(ctx, t, "pull", fmt.Sprintf("ml2-%d", i), "", "quay.io/berth/ml:2", only)); got != other {
				t.Errorf("ml2-%d → %s, want %s where ml2-direct is pulling the image", i, got, other)
			}
		}
	})

	t.Run("nodes without NodeImages are read from node.status.images", func(t *testing.T) {
		nodes := e.nodes(ctx, t, "status", "status-1", "status-2", "status-3")
		// Retried on conflict: KWOK heartbeats the same node status while we write it.
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, nodes[1], metav1.GetOptions{})
			if err != nil {
				return err
			}
			// kubelet's form: digest then tag, as the runtime names them.
			n.Status.Images = []corev1.ContainerImage{{Names: []string{"docker.io/library/redis@" + digestX, "docker.io/library/redis:7"}, SizeBytes: 2000 * mib}}
			_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// status-3 has a NodeImages object without redis: its inventory wins over any status.
		e.images(ctx, t, nodes[2], framework.NodeImage{Tags: []string{"docker.io/library/other:1"}, Size: mib})
		for i := 0; i < 3; i++ {
			if got := e.bound(ctx, t, e.pod(ctx, t, "status", fmt.Sprintf("redis-%d", i), "", "redis:7")); got != nodes[1] {
				t.Errorf("redis-%d → %s, want %s (its node.status.images lists redis:7)", i, got, nodes[1])
			}
		}
	})
}

// nodes adds KWOK nodes labelled for one case, big enough that resources never decide, and
// waits until they are schedulable.
func (e *env) nodes(ctx context.Context, t *testing.T, group string, names ...string) []string {
	t.Helper()
	for _, n := range names {
		if err := e.c.AddNodes(ctx, cluster.NodeSpec{Name: n, CPU: "64", Memory: "256Gi", Pods: 200,
			Labels: map[string]string{suiteLabel: group}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := framework.WaitUntainted(ctx, e.c.Client, names...); err != nil {
		t.Fatal(err)
	}
	return names
}

// images publishes a node's inventory and gives the scheduler's informer a moment to see it.
func (e *env) images(ctx context.Context, t *testing.T, node string, images ...framework.NodeImage) {
	t.Helper()
	if err := framework.WriteNodeImages(ctx, e.dyn, node, images...); err != nil {
		t.Fatal(err)
	}
	// why: the scheduler reads NodeImages from its informer; a pod created in the same instant
	// could be scored before the watch event arrives.
	time.Sleep(500 * time.Millisecond)
}

func (e *env) pod(ctx context.Context, t *testing.T, group, name, nodeName, image string) *corev1.Pod {
	return e.podOn(ctx, t, group, name, nodeName, image, nil)
}

// podOn creates a bare pod (no owner, so no default topology spreading) restricted to the
// case's nodes, and to `only` when given.
func (e *env) podOn(ctx context.Context, t *testing.T, group, name, nodeName, image string, only []string) *corev1.Pod {
	t.Helper()
	spec := framework.PodSpec(schedulerName, "10m", "16Mi")
	spec.Containers[0].Image = image
	spec.NodeName = nodeName
	spec.NodeSelector = map[string]string{suiteLabel: group}
	if len(only) > 0 {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: only}}}}}}}
	}
	p, err := e.c.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, name, map[string]string{"case": group}, spec), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bound waits until the pod has a node and returns it.
func (e *env) bound(ctx context.Context, t *testing.T, p *corev1.Pod) string {
	t.Helper()
	var node string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := e.c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = got.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s not bound: %v", p.Name, err)
	}
	return strings.TrimSpace(node)
}
