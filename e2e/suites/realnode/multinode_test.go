package realnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// TestThreeRealNodes runs three real nodes (the cluster namespace's and two of their own)
// beside a KWOK node: pods on different nodes reach each other by IP with their own source
// addresses, a Service answers from every node's namespace and from pods, and Stop leaves
// nothing of any node behind.
func TestThreeRealNodes(t *testing.T) {
	framework.NeedRealNode(t)
	before := framework.ReadHostStateAlone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	img, err := framework.NetechoImage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{
		RealNode: &cluster.RealNodeConfig{Count: 3, Images: []string{img}, ClusterDNS: true},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 real nodes up in %s; %s", time.Since(start).Round(100*time.Millisecond), c.Footprint(os.Getpid()))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			c.Stop()
		}
	})
	rns := c.RealNodes()
	if len(rns) != 3 {
		t.Fatalf("%d real nodes, want 3", len(rns))
	}
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: "kwok-1", CPU: "4", Memory: "8Gi"}); err != nil {
		t.Fatal(err)
	}
	const ns = "multinode"
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}

	t.Run("every node is Ready at its own address, in a namespace of its own", func(t *testing.T) {
		wantNames := []string{"berth-real", "berth-real-2", "berth-real-3"}
		wantIPs := []string{"10.244.0.1", "10.244.1.1", "10.244.2.1"}
		inodes := map[uint64]string{}
		for i, rn := range rns {
			if rn.NodeName != wantNames[i] || rn.IP != wantIPs[i] {
				t.Errorf("node %d: %s at %s, want %s at %s", i, rn.NodeName, rn.IP, wantNames[i], wantIPs[i])
			}
			n, err := c.Client.CoreV1().Nodes().Get(ctx, rn.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := internalIP(n); got != rn.IP {
				t.Errorf("node %s InternalIP %q, want %s", rn.NodeName, got, rn.IP)
			}
			if other, dup := inodes[rn.NetNSInode]; dup {
				t.Errorf("nodes %s and %s share a network namespace", other, rn.NodeName)
			}
			inodes[rn.NetNSInode] = rn.NodeName
			out, err := rn.InNetNS(ctx, "ip", "-o", "addr", "show", "dev", cluster.RealNodeBridge)
			if err != nil || !strings.Contains(out, rn.IP+"/24") {
				t.Errorf("node %s bridge: %v %s", rn.NodeName, err, out)
			}
			if hostHasAddr(t, rn.IP) {
				t.Errorf("%s is assigned in the root namespace", rn.IP)
			}
			if !strings.HasPrefix(rn.CgroupName, "berth-") {
				t.Errorf("node %s cgroup %q", rn.NodeName, rn.CgroupName)
			}
		}
	})

	// One netecho pod per real node, bound by the stock scheduler through a node selector.
	podIPs := map[string]string{}
	for _, rn := range rns {
		p := framework.NetechoPod(ns, "echo-"+rn.NodeName, "", map[string]string{"app": "echo", "node": rn.NodeName})
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: rn.NodeName}
		p.Spec.EnableServiceLinks = new(bool)
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := framework.WaitPods(ctx, c.Client, ns, "app=echo", 3, 2*time.Minute, podReady)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		rn := c.RealNodeNamed(p.Spec.NodeName)
		if rn == nil || p.Labels["node"] != p.Spec.NodeName {
			t.Fatalf("pod %s ran on %q, want %s", p.Name, p.Spec.NodeName, p.Labels["node"])
		}
		if !mustCIDR(rn.Subnet).Contains(net.ParseIP(p.Status.PodIP)) {
			t.Errorf("pod %s IP %s outside its node's subnet %s", p.Name, p.Status.PodIP, rn.Subnet)
		}
		podIPs[rn.NodeName] = p.Status.PodIP
	}

	t.Run("pods on different nodes exchange TCP and UDP by IP, source addresses kept", func(t *testing.T) {
		for _, pair := range [][2]string{{"berth-real", "berth-real-3"}, {"berth-real-3", "berth-real"}, {"berth-real-2", "berth-real-3"}} {
			from, to := pair[0], pair[1]
			for _, proto := range []string{"tcp", "udp"} {
				// Asked from the sender's own node: every hop is a routed one.
				r, err := framework.NetechoSend(ctx, c.RealNodeNamed(from), podIPs[from], proto, net.JoinHostPort(podIPs[to], "7777"))
				if err != nil {
					t.Errorf("%s %s -> %s: %v", proto, from, to, err)
					continue
				}
				if r.Server != "echo-"+to || !strings.HasPrefix(r.SeenFrom, podIPs[from]+":") {
					t.Errorf("%s %s -> %s: answered by %q seeing %q, want echo-%s seeing %s", proto, from, to, r.Server, r.SeenFrom, to, podIPs[from])
				}
			}
		}
	})

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "echo", "node": "berth-real-3"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}, {Name: "echo", Port: 7777, TargetPort: intstr.FromInt32(7777)}},
	}}
	svc, err = c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a Service answers from every node's namespace and from pods on every node", func(t *testing.T) {
		for _, rn := range rns {
			hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: rn.DialContext, DisableKeepAlives: true}}
			var last error
			// kube-proxy on each node programs the Service on its own schedule.
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				resp, err := hc.Get("http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/healthz")
				if err != nil {
					last = err
					return false, nil
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				last = fmt.Errorf("answered %s", resp.Status)
				return resp.StatusCode == http.StatusOK, nil
			})
			if err != nil {
				t.Errorf("Service %s:80 from node %s's namespace: %v", svc.Spec.ClusterIP, rn.NodeName, last)
			}
			r, err := framework.NetechoSend(ctx, rn, podIPs[rn.NodeName], "tcp", net.JoinHostPort(svc.Spec.ClusterIP, "7777"))
			if err != nil || r.Server != "echo-berth-real-3" {
				t.Errorf("Service from the pod on %s: %+v %v", rn.NodeName, r, err)
			}
		}
	})

	t.Run("chart components stay off the simulated node; workloads that tolerate it land there", func(t *testing.T) {
		kwok, err := c.Client.CoreV1().Nodes().Get(ctx, "kwok-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tainted := false
		for _, tn := range kwok.Spec.Taints {
			tainted = tainted || tn.MatchTaint(&cluster.SimulatedTaint)
		}
		if !tainted {
			t.Fatalf("kwok-1 taints %v lack %v", kwok.Spec.Taints, cluster.SimulatedTaint)
		}
		// The chart's own Deployments, placement as rendered (tolerations, affinity, node
		// selector), pause as their container: five replicas each for the stock scheduler.
		r, err := chart.Render("berth", "berth-system", nil)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := chart.Objects(r.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		var deps []appsv1.Deployment
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			deps = append(deps, d)
		}
		if len(deps) == 0 {
			t.Fatal("the chart rendered no Deployment")
		}
		for _, d := range deps {
			labels := map[string]string{"chart-placement": d.Name}
			tmpl := d.Spec.Template.Spec
			spec := corev1.PodSpec{Tolerations: tmpl.Tolerations, Affinity: tmpl.Affinity, NodeSelector: tmpl.NodeSelector,
				TerminationGracePeriodSeconds: new(int64), EnableServiceLinks: new(bool),
				Containers: []corev1.Container{{Name: "c", Image: cluster.PauseImage, ImagePullPolicy: corev1.PullNever}}}
			replicas := int32(5)
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chart-" + d.Name}, Spec: appsv1.DeploymentSpec{
				Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
			if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pods, err := framework.WaitPods(ctx, c.Client, ns, "chart-placement="+d.Name, 5, 2*time.Minute, framework.Running)
			if err != nil {
				t.Fatalf("chart Deployment %s: %v", d.Name, err)
			}
			for _, p := range pods {
				if c.RealNodeNamed(p.Spec.NodeName) == nil {
					t.Errorf("chart Deployment %s: pod %s placed on %s, not a real node", d.Name, p.Name, p.Spec.NodeName)
				}
			}
		}
		spec := framework.PodSpec("", "10m", "16Mi")
		spec.NodeSelector = map[string]string{corev1.LabelHostname: "kwok-1"}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, "simulated", map[string]string{"case": "simulated"}, spec), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := framework.WaitPods(ctx, c.Client, ns, "case=simulated", 1, time.Minute, framework.Running); err != nil {
			t.Errorf("a workload tolerating simulated nodes did not run on kwok-1: %v", err)
		}
	})

	t.Run("DNS on the first node answers pods on the last", func(t *testing.T) {
		r, err := framework.NetechoSend(ctx, rns[2], podIPs["berth-real-3"], "tcp", "echo."+ns+".svc.cluster.local:7777")
		if err != nil || r.Server != "echo-berth-real-3" {
			t.Errorf("echo.%s by name from berth-real-3: %+v %v", ns, r, err)
		}
	})

	// Teardown: every node's processes, namespaces, cgroups and shims go.
	var pids []int
	for _, p := range c.Processes() {
		pids = append(pids, p.PID())
	}
	var shims []int
	var inodes []uint64
	var cgs []string
	for _, rn := range rns {
		s := cluster.PIDsWithArg(rn.ContainerdSocket)
		if len(s) == 0 {
			t.Errorf("expected containerd shims naming %s before Stop", rn.ContainerdSocket)
		}
		shims = append(shims, s...)
		inodes = append(inodes, rn.NetNSInode)
		cgs = append(cgs, rn.CgroupName)
	}
	dir := c.Dir
	held := framework.HoldNetNS(t, inodes...)
	start = time.Now()
	c.Stop()
	stopped = true
	t.Logf("Stop took %s", time.Since(start).Round(time.Millisecond))
	framework.CheckLeftovers(t, framework.Leftovers{Stop: "Stop", PIDs: append(pids, shims...), Dir: dir, DirName: "cluster dir",
		NetNS: held, Cgroups: cgs})
	after := framework.ReadHostStateAlone(t)
	after.CheckUnchanged(t, before)
}

// TestFailingRealNodeIsNamed: when one node of three cannot start, the error names that
// node's component with its log tail, and the nodes that did start are torn down with it.
func TestFailingRealNodeIsNamed(t *testing.T) {
	framework.NeedRealNode(t)
	before := framework.ReadHostStateAlone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var dir string
	_, err := cluster.Start(ctx, cluster.Config{
		RealNode:                &cluster.RealNodeConfig{Count: 3},
		WithoutDefaultScheduler: true, WithoutKWOK: true,
		ExtraArgs: map[string][]string{"kubelet-berth-real-3": {"--no-such-flag"}},
		OnProcess: func(p *cluster.Process) { dir = filepath.Dir(filepath.Dir(p.LogPath)) },
	})
	if err == nil || !strings.Contains(err.Error(), "kubelet-berth-real-3") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("want an error naming kubelet-berth-real-3 with the bad flag from its log, got %v", err)
	}
	if dir == "" {
		t.Fatal("no process started")
	}
	checkFailedStart(t, dir, before, framework.ReadHostStateAlone)
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
