package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// TestSchedulerFailoverWhenItsNodeStops installs the chart on three real nodes with two
// berth-scheduler replicas, which the operator's Deployment spreads over the two nodes
// labelled for them; the node of the replica holding the Lease is then stopped as a machine
// fails (kubelet, kube-proxy, containerd and its containers killed), and the standby on the
// other node takes the Lease over and binds pods.
func TestSchedulerFailoverWhenItsNodeStops(t *testing.T) {
	framework.NeedRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{
		RealNode: &cluster.RealNodeConfig{Count: 3, ClusterDNS: true},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	rns := c.RealNodes()
	const (
		ns        = "berth-system"
		schedNode = "berth.io/e2e-scheduler-node"
	)
	// The control plane's node keeps the operator, the load watcher and DNS; the schedulers
	// go to the other two.
	for _, rn := range rns[1:] {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, schedNode))
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, rn.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pin := map[string]any{corev1.LabelHostname: rns[0].NodeName}
	img := func(repo string) map[string]any {
		return map[string]any{"repository": repo, "tag": "dev", "pullPolicy": "Never"}
	}
	values := map[string]any{
		"operator": map[string]any{"nodeSelector": pin, "image": img("localhost/berth/berth-operator")},
		"scheduler": map[string]any{"nodeSelector": map[string]any{schedNode: "true"}, "replicas": 2,
			"image":     img("localhost/berth/berth-scheduler"),
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}}},
		"loadWatcher": map[string]any{"nodeSelector": pin, "image": img("localhost/berth/berth-loadwatcher")},
		"agent":       map[string]any{"nodeSelector": pin, "image": img("localhost/berth/berth-agent")},
	}
	cfg, err := chart.Config(c.Kubeconfig, ns, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chart.Install(ctx, cfg, "berth", ns, values, 4*time.Minute); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	const sel = "app.kubernetes.io/name=berth-scheduler"
	pods, err := framework.WaitPods(ctx, c.Client, ns, sel, 2, 3*time.Minute, podReady)
	if err != nil {
		t.Fatal(err)
	}
	nodeOf := map[string]string{}
	for _, p := range pods {
		nodeOf[p.Name] = p.Spec.NodeName
	}
	if pods[0].Spec.NodeName == pods[1].Spec.NodeName {
		t.Fatalf("both scheduler replicas run on %s; the Deployment should spread them", pods[0].Spec.NodeName)
	}
	leader := func() string {
		l, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, "berth-scheduler", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		// The scheduler's identity is <hostname>_<uuid>; a pod's hostname is its name.
		return strings.SplitN(*l.Spec.HolderIdentity, "_", 2)[0]
	}
	var first string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		first = leader()
		return nodeOf[first] != "", nil
	}); err != nil {
		t.Fatalf("no scheduler replica holds Lease %s/berth-scheduler (holder %q)", ns, first)
	}
	stopped := nodeOf[first]
	t.Logf("leader %s on %s; replicas %v", first, stopped, nodeOf)

	start := time.Now()
	if err := c.StopRealNode(stopped); err != nil {
		t.Fatal(err)
	}
	var next string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		next = leader()
		return next != first && nodeOf[next] != "", nil
	}); err != nil {
		t.Fatalf("the standby never took Lease %s/berth-scheduler over after %s stopped (holder %q)", ns, stopped, next)
	}
	t.Logf("standby %s on %s took the Lease over %s after %s stopped (upstream lease timings: 15s lease, 10s renew deadline)",
		next, nodeOf[next], time.Since(start).Round(100*time.Millisecond), stopped)

	// The new leader binds a pod; the stopped node gets none (it is not Ready any more, or
	// soon not: the pod goes to a node that runs).
	live := nodeOf[next]
	spec := framework.PodSpec("berth-scheduler", "10m", "16Mi")
	spec.NodeSelector = map[string]string{corev1.LabelHostname: live}
	pod := framework.Pod("default", "after-failover", map[string]string{"case": "after-failover"}, spec)
	created, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := framework.WaitSchedulingEvent(ctx, c.Client, created, "Scheduled", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Scheduler != "berth-scheduler" {
		t.Errorf("after the failover the pod was bound by %q, want berth-scheduler", ev.Scheduler)
	}
	if _, err := framework.WaitPods(ctx, c.Client, "default", "case=after-failover", 1, 2*time.Minute, framework.Running); err != nil {
		t.Errorf("the pod bound by the new leader did not run on %s: %v", live, err)
	}

	// The stopped node's containers are gone from the machine while the cluster runs on.
	rn := c.RealNodeNamed(stopped)
	if left := cluster.PIDsWithArg(rn.ContainerdSocket); len(left) > 0 {
		t.Errorf("processes of the stopped node %s still run: %v", stopped, left)
	}
	cms, err := cluster.CgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cms {
		_ = filepath.WalkDir(filepath.Join(m.Point, rn.CgroupName), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(filepath.Join(path, "cgroup.procs")); err == nil && strings.TrimSpace(string(b)) != "" {
				t.Errorf("processes left in the stopped node's cgroup %s: %s", path, strings.Fields(string(b)))
			}
			return nil
		})
	}
}
