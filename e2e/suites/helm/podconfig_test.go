package helm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/operator"
)

// hookLog collects what Helm copies from failed hooks (helm.sh/hook-output-log-policy).
type hookLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (h *hookLog) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.Write(p)
}

func (h *hookLog) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}

// TestHelmPodConfigs installs the chart with PodConfig and the image inventory on the local
// cluster's real node (issue 20): the agent with agent.criSocket at the harness's containerd
// socket (under a .cache-like state directory) becomes Ready; a wrong socket fails helm
// upgrade, naming the agent and why; with the operator gone, `kubectl berth podconfig release`
// lets a namespace holding a PodConfig be deleted; and helm uninstall with live PodConfigs
// succeeds and leaves no PodConfig, IPAllocation, NodeImages or PodConfig veth behind.
func TestHelmPodConfigs(t *testing.T) {
	framework.NeedRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{
		RealNode:    &cluster.RealNodeConfig{NodeName: realNode, ClusterDNS: true},
		WithoutKWOK: true, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	rn := c.RealNode()
	cl := framework.OperatorClient(t, c)
	cfg, err := chart.Config(c.Kubeconfig, ns, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	hooks := &hookLog{}
	cfg.SetHookOutputFunc(func(_, pod, container string) io.Writer {
		fmt.Fprintf(hooks, "--- hook pod %s, container %s:\n", pod, container)
		return hooks
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hook logs Helm copied:\n%s", hooks)
			dump(t, c)
		}
	})
	// The PodConfig feature on the real node: the agent needs the CRI socket for it.
	vals := func(criSocket string) map[string]any {
		v := values(1)
		v["podConfig"] = map[string]any{"enabled": true, "clusterCIDRs": []any{"10.244.0.0/16", cluster.ServiceCIDR}}
		v["agent"].(map[string]any)["criSocket"] = criSocket
		return v
	}
	t.Logf("cluster with real node up after %s; containerd's socket %s", time.Since(start).Round(time.Second), rn.ContainerdSocket)

	t.Run("helm install with agent.criSocket at the local cluster's containerd socket: the agent Ready, the node's images published", func(t *testing.T) {
		if _, err := chart.Install(ctx, cfg, release, ns, vals(rn.ContainerdSocket), 4*time.Minute); err != nil {
			t.Fatalf("helm install: %v", err)
		}
		if _, err := framework.WaitPods(ctx, c.Client, ns, "app.kubernetes.io/name=berth-agent", 1, time.Minute, ready); err != nil {
			t.Fatal(err)
		}
		ni := &berthv1alpha1.NodeImages{}
		if err := cl.Get(ctx, client.ObjectKey{Name: realNode}, ni); err != nil {
			t.Fatalf("NodeImages %s: %v", realNode, err)
		}
		if !meta.IsStatusConditionTrue(ni.Status.Conditions, berthv1alpha1.NodeImagesConditionReady) || len(ni.Spec.Images) == 0 {
			t.Errorf("NodeImages %s: %d images, conditions %+v", realNode, len(ni.Spec.Images), ni.Status.Conditions)
		}
	})

	t.Run("a wrong agent.criSocket: helm upgrade fails naming the agent and its socket; the right one recovers", func(t *testing.T) {
		// A directory that exists on the node, a socket that does not.
		wrong := filepath.Join(filepath.Dir(rn.ContainerdSocket), "missing.sock")
		before := len(hooks.String())
		// Helm's --timeout ends the hook's wait; what it logged by then is the reason.
		_, err := chart.Upgrade(ctx, cfg, release, ns, vals(wrong), 75*time.Second)
		if err == nil {
			t.Fatal("helm upgrade to a missing CRI socket succeeded")
		}
		got := hooks.String()[before:]
		// The PodConfig executor's check or the image inventory's, whichever the agent names
		// first: both say the socket.
		for _, want := range []string{"agents not Ready", realNode + ": /readyz 503: ", "CRI socket /run/berth/cri/missing.sock"} {
			if !strings.Contains(got, want) {
				t.Errorf("helm upgrade failed (%v) but the hook log it printed lacks %q:\n%s", err, want, got)
			}
		}
		t.Logf("helm upgrade: %v; the hook log Helm printed:\n%s", err, got)
		if _, err := chart.Upgrade(ctx, cfg, release, ns, vals(rn.ContainerdSocket), 3*time.Minute); err != nil {
			t.Fatalf("helm upgrade back to the right socket: %v", err)
		}
	})

	t.Run("operator gone: kubectl berth podconfig release lets a namespace holding a PodConfig be deleted", func(t *testing.T) {
		const gone = "helm-gone"
		peers, network := livePodConfig(ctx, t, c, cl, gone, "cnf", 1)
		checkLinks(ctx, t, rn, peers, true)
		scaleOperator(ctx, t, c, cl, 0)
		if err := cl.Delete(ctx, &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: gone, Name: "cnf"}}); err != nil {
			t.Fatal(err)
		}
		// Its pod still runs: release refuses, naming it.
		_, stderr, err := kubectlBerth(ctx, c, c.Kubeconfig, "podconfig", "release", gone+"/cnf")
		if err == nil || !strings.Contains(stderr, gone+"/cnf-pod (on "+realNode+", Running)") {
			t.Errorf("release with the pod running: %v %s; want a refusal naming %s/cnf-pod", err, stderr, gone)
		}
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, gone, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var out string
		err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			stdout, stderr, err := kubectlBerth(ctx, c, c.Kubeconfig, "podconfig", "release", gone+"/cnf")
			out = stdout + stderr
			return err == nil && strings.Contains(stdout, "released"), nil
		})
		if err != nil {
			t.Fatalf("release never succeeded: %s", out)
		}
		t.Logf("%s", strings.TrimSpace(out))
		err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Namespaces().Get(ctx, gone, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			nsObj, _ := c.Client.CoreV1().Namespaces().Get(ctx, gone, metav1.GetOptions{})
			t.Fatalf("namespace %s not deleted after release: %+v", gone, nsObj.Status)
		}
		checkLinks(ctx, t, rn, peers, false)
		var pools berthv1alpha1.IPAllocationList
		if err := cl.List(ctx, &pools); err != nil {
			t.Fatal(err)
		}
		for _, p := range pools.Items {
			for _, a := range p.Spec.Allocations {
				if a.PodNamespace == gone {
					t.Errorf("IPAllocation %s still holds %s for %s/%s", p.Name, a.Address, a.PodNamespace, a.PodName)
				}
			}
		}
		// The operator back, the network holds nothing: it goes when deleted.
		scaleOperator(ctx, t, c, cl, 1)
		deleteNetwork(ctx, t, cl, network)
	})

	t.Run("helm uninstall with a live PodConfig: succeeds, no PodConfig, IPAllocation, NodeImages or PodConfig veth left", func(t *testing.T) {
		const live = "helm-live"
		peers, network := livePodConfig(ctx, t, c, cl, live, "cnf", 2)
		checkLinks(ctx, t, rn, peers, true)
		// The dashboard's PodConfig panel, from the real Prometheus scraping the agent pod.
		testPodConfigPanel(ctx, t, c, rn, len(peers))
		if n := count(ctx, t, cl, &berthv1alpha1.NodeImagesList{}); n == 0 {
			t.Fatal("no NodeImages before uninstall: their absence afterwards would prove nothing")
		}
		if n := count(ctx, t, cl, &berthv1alpha1.IPAllocationList{}); n == 0 {
			t.Fatal("no IPAllocation before uninstall: their absence afterwards would prove nothing")
		}
		before := len(hooks.String())
		start := time.Now()
		if err := chart.Uninstall(cfg, release, 4*time.Minute); err != nil {
			t.Fatalf("helm uninstall: %v\nhook log:\n%s", err, hooks.String()[before:])
		}
		t.Logf("helm uninstall took %s", time.Since(start).Round(time.Second))
		for _, l := range []client.ObjectList{&berthv1alpha1.PodConfigList{}, &berthv1alpha1.IPAllocationList{}, &berthv1alpha1.NodeImagesList{}} {
			if n := count(ctx, t, cl, l); n != 0 {
				t.Errorf("%T: %d left after uninstall", l, n)
			}
		}
		links, err := rn.InNetNS(ctx, "ip", "-o", "link", "show")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(links, "\n") {
			if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "bp") {
				t.Errorf("PodConfig link left on the node: %s", l)
			}
		}
		// Released by the hook: the administrator's network is kept and deletes at once.
		deleteNetwork(ctx, t, cl, network)
		// And the namespace that held the PodConfig deletes (no finalizer left to wait on).
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, live, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Namespaces().Get(ctx, live, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("namespace %s not deleted after uninstall: %v", live, err)
		}
		berth := []string{"app.kubernetes.io/part-of=berth", operator.LabelOwnerNamespace + "=" + ns}
		err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			return len(leftovers(ctx, t, c, berth)) == 0, nil
		})
		if err != nil {
			t.Errorf("left behind: %v", leftovers(ctx, t, c, berth))
		}
	})
	t.Logf("total %s", time.Since(start).Round(time.Second))
}

// checkLinks checks that every one of the host-side link names is (or is no longer) on the node.
func checkLinks(ctx context.Context, t *testing.T, rn *cluster.RealNode, names []string, present bool) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		out, err := rn.InNetNS(ctx, "ip", "-o", "link", "show")
		if err != nil {
			return false, err
		}
		var have []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				have = append(have, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
			}
		}
		last = strings.Join(have, " ")
		for _, n := range names {
			if slices.Contains(have, n) != present {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("links %v present=%v never true on the node; links: %s", names, present, last)
	}
}

// scaleOperator sets the operator Deployment's replicas and waits until that many operator
// pods run and are Ready (none left for 0).
func scaleOperator(ctx context.Context, t *testing.T, c *cluster.Cluster, cl client.Client, n int32) {
	t.Helper()
	key := types.NamespacedName{Namespace: ns, Name: release + "-operator"}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)))
	if err := cl.Patch(ctx, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, patch); err != nil {
		t.Fatal(err)
	}
	sel := "app.kubernetes.io/name=berth-operator"
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		readyPods := 0
		for i := range pods.Items {
			if ready(&pods.Items[i]) && pods.Items[i].DeletionTimestamp == nil {
				readyPods++
			}
		}
		return len(pods.Items) == int(n) && readyPods == int(n), nil
	})
	if err != nil {
		t.Fatalf("operator not at %d ready replicas", n)
	}
}

// deleteNetwork deletes a PodNetwork and waits until it is gone: nothing may hold it.
func deleteNetwork(ctx context.Context, t *testing.T, cl client.Client, name string) {
	t.Helper()
	pn := &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cl.Delete(ctx, pn); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKeyFromObject(pn), pn)), nil
	})
	if err != nil {
		t.Errorf("PodNetwork %s not gone after deletion: finalizers %v, status %+v", name, pn.Finalizers, pn.Status)
	}
}

func count(ctx context.Context, t *testing.T, cl client.Client, l client.ObjectList) int {
	t.Helper()
	if err := cl.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	return meta.LenList(l)
}
