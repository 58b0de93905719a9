// Package realnode runs the local cluster with one real node (containerd, kubelet, kube-proxy
// and a CNI bridge, all inside the cluster's own network namespace) beside a KWOK node, runs
// real pods on it from the offline-built images, and checks that Stop leaves nothing behind.
// It needs root and `make tools images`; see cluster.RealNodePackages for the host packages.
package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

const realNodeName = "berth-real"

func TestRealNodeRunsPodsAndLeavesNothing(t *testing.T) {
	framework.NeedRealNode(t)
	before := framework.ReadHostState(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{
		RealNode: &cluster.RealNodeConfig{NodeName: realNodeName, Labels: map[string]string{"berth.io/real": "true"}},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			c.Stop()
		}
	})
	rn := c.RealNode()
	if rn == nil {
		t.Fatal("cluster started without its real node")
	}
	if _, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: "kwok-1", CPU: "4", Memory: "8Gi"}); err != nil {
		t.Fatal(err)
	}
	const ns = "realnode"
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}

	t.Run("the real node is Ready beside the KWOK node, addressed only inside the namespace", func(t *testing.T) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, realNodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, kwok := n.Annotations[cluster.KWOKNodeAnnotation]; kwok {
			t.Errorf("node %s carries the KWOK annotation; it should be the kubelet's", realNodeName)
		}
		if n.Labels["berth.io/real"] != "true" {
			t.Errorf("node labels %v lack berth.io/real=true", n.Labels)
		}
		if v := n.Status.NodeInfo.KubeletVersion; v != "v1.37.1" {
			t.Errorf("kubelet version %q, want v1.37.1", v)
		}
		if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			t.Errorf("runtime %q, want containerd", n.Status.NodeInfo.ContainerRuntimeVersion)
		}
		var ip string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		if ip != cluster.RealNodeIP {
			t.Errorf("node InternalIP %q, want %s", ip, cluster.RealNodeIP)
		}
		// The node IP exists inside the namespace and not in the root one.
		out, err := rn.InNetNS(ctx, "ip", "-o", "addr", "show", "dev", cluster.RealNodeBridge)
		if err != nil || !strings.Contains(out, cluster.RealNodeIP+"/24") {
			t.Errorf("bridge inside the namespace: %v %s", err, out)
		}
		if hostHasAddr(t, cluster.RealNodeIP) {
			t.Errorf("%s is assigned in the root namespace", cluster.RealNodeIP)
		}
		if err := c.WaitNodeReady(ctx, "kwok-1", time.Minute); err != nil {
			t.Error(err)
		}
	})

	cases := []struct {
		name, scheduler, image string
	}{
		// The stock scheduler and berth-scheduler both place pods on the real node.
		{"pause-default", "", cluster.PauseImage},
		{"pause-berth", "berth-scheduler", cluster.PauseImage},
	}
	for _, tc := range cases {
		t.Run("pod "+tc.name+" runs for real", func(t *testing.T) {
			spec := framework.PodSpec(tc.scheduler, "10m", "16Mi")
			spec.NodeSelector = map[string]string{"kubernetes.io/hostname": realNodeName}
			spec.Containers[0].Image = tc.image
			spec.Containers[0].ImagePullPolicy = corev1.PullNever
			pod := framework.Pod(ns, tc.name, map[string]string{"case": tc.name}, spec)
			created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pods, err := framework.WaitPods(ctx, c.Client, ns, "case="+tc.name, 1, 2*time.Minute, framework.Running)
			if err != nil {
				t.Fatal(describe(ctx, c, ns, tc.name, err))
			}
			p := pods[0]
			if p.Spec.NodeName != realNodeName {
				t.Fatalf("pod ran on %s, want %s", p.Spec.NodeName, realNodeName)
			}
			if ip := net.ParseIP(p.Status.PodIP); ip == nil || !mustCIDR(cluster.RealNodeSubnet).Contains(ip) {
				t.Errorf("pod IP %q is not on the bridge subnet %s", p.Status.PodIP, cluster.RealNodeSubnet)
			}
			if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
				t.Fatalf("container not running: %+v", p.Status.ContainerStatuses)
			}
			id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
			out, err := rn.Ctr(ctx, "tasks", "ls")
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(regexp.QuoteMeta(id) + `\s+\d+\s+RUNNING`).MatchString(out) {
				t.Errorf("containerd has no running task %s:\n%s", id, out)
			}
			wantScheduler := tc.scheduler
			if wantScheduler == "" {
				wantScheduler = "default-scheduler"
			}
			ev, err := framework.WaitSchedulingEvent(ctx, c.Client, created, "Scheduled", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Scheduler != wantScheduler {
				t.Errorf("bound by %q, want %q", ev.Scheduler, wantScheduler)
			}
		})
	}

	t.Run("a pod on the KWOK node is simulated, not run", func(t *testing.T) {
		spec := framework.PodSpec("berth-scheduler", "10m", "16Mi")
		spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "kwok-1"}
		pod := framework.Pod(ns, "on-kwok", map[string]string{"case": "on-kwok"}, spec)
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := framework.WaitPods(ctx, c.Client, ns, "case=on-kwok", 1, time.Minute, framework.Running); err != nil {
			t.Fatal(err)
		}
	})

	// Teardown: record what the cluster owns, stop it, and look for every kind of leftover.
	var pids []int
	for _, p := range c.Processes() {
		pids = append(pids, p.PID())
	}
	shims := cluster.PIDsWithArg(rn.ContainerdSocket)
	if len(shims) == 0 {
		t.Errorf("expected containerd shims naming %s before Stop", rn.ContainerdSocket)
	}
	dir, binDir, cg := c.Dir, c.BinDir, rn.CgroupName
	held := framework.HoldNetNS(t, rn.NetNSInode)
	start := time.Now()
	c.Stop()
	stopped = true
	t.Logf("Stop took %s", time.Since(start).Round(time.Millisecond))

	framework.CheckLeftovers(t, framework.Leftovers{Stop: "Stop", PIDs: append(pids, shims...), Dir: dir, DirName: "cluster dir",
		NetNS: held, Cgroups: []string{cg}})
	for _, pid := range pidsRunningFrom(binDir, dir) {
		t.Errorf("process %d runs a cluster binary for this cluster: %s", pid, framework.Cmdline(pid))
	}
	after := framework.ReadHostState(t)
	after.CheckUnchanged(t, before)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s not removed: %v", dir, err)
	}
}

func TestRealNodeLeavesNothingWhenStartFails(t *testing.T) {
	framework.NeedRealNode(t)
	// A kubelet that cannot start: everything before it (namespace, containerd, cgroups,
	// mounts) must still be undone by the failed Start.
	before := framework.ReadHostState(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var dir string
	_, err := cluster.Start(ctx, cluster.Config{
		RealNode:                &cluster.RealNodeConfig{},
		WithoutDefaultScheduler: true,
		ExtraArgs:               map[string][]string{cluster.Kubelet: {"--no-such-flag"}},
		OnProcess: func(p *cluster.Process) {
			dir = filepath.Dir(filepath.Dir(p.LogPath))
		},
	})
	if err == nil || !strings.Contains(err.Error(), cluster.Kubelet) || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("want a kubelet error naming the bad flag, got %v", err)
	}
	if dir == "" {
		t.Fatal("no process started")
	}
	checkFailedStart(t, dir, before, framework.ReadHostState)
}

// checkFailedStart: after a Start that failed, nothing it started runs or is mounted in dir,
// the root namespace (read by readState once the processes are checked) is as before, and no
// berth-* cgroup is left.
func checkFailedStart(t *testing.T, dir string, before framework.HostState, readState func(*testing.T) framework.HostState) {
	t.Helper()
	for _, pid := range cluster.PIDsWithArg(dir) {
		t.Errorf("process %d survived: %s", pid, framework.Cmdline(pid))
	}
	if ms, _ := cluster.MountsUnder(dir); len(ms) > 0 {
		t.Errorf("mounts left: %v", ms)
	}
	if after := readState(t); !after.SameNamespace(before) {
		t.Errorf("root namespace changed: links %v -> %v", before.Links, after.Links)
	}
	cms, _ := cluster.CgroupMounts()
	for _, m := range cms {
		ents, _ := filepath.Glob(filepath.Join(m.Point, "berth-*"))
		for _, e := range ents {
			t.Errorf("cgroup %s left behind", e)
		}
	}
}

func describe(ctx context.Context, c *cluster.Cluster, ns, name string, err error) error {
	p, gerr := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if gerr != nil {
		return err
	}
	evs, _ := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	var b strings.Builder
	fmt.Fprintf(&b, "%v\nphase %s on %q; conditions %+v; statuses %+v\n", err, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions, p.Status.ContainerStatuses)
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "event %s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	return fmt.Errorf("%s", b.String())
}

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

func hostHasAddr(t *testing.T, ip string) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}

// pidsRunningFrom lists processes whose executable is in binDir and whose arguments name dir.
func pidsRunningFrom(binDir, dir string) []int {
	return framework.PIDs(func(pid int, proc string) bool {
		exe, err := os.Readlink(filepath.Join(proc, "exe"))
		return err == nil && strings.HasPrefix(exe, binDir+"/") && strings.Contains(framework.Cmdline(pid), dir)
	})
}
