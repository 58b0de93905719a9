// Package berthctl runs `kubectl berth nodes` and `kubectl berth status` (the built plugin
// binary) against the local cluster: KWOK nodes whose load the real berth-agent reports from
// its fixture /proc through the real berth-loadwatcher, a pod placed with requests, one node
// whose agent never reported. It checks what the commands read back from the running system
// (measured and requested, fresh and missing, instance class, selector and sort order), the
// status of an installation with no scheduler running (exit 1, the leader check says so), and
// the bad inputs: a caller without RBAC (one sentence, exit 1) who, once bound to the chart's
// own berthctl-reader roles, gets the answer; and a load watcher of another vendor.
package berthctl

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/berthctl"
)

func TestMain(m *testing.M) { framework.RunIsolated(m) }

const (
	ns       = "berthctl-e2e"
	berthNS  = "berth-system"
	devUser  = "berthctl-dev"
	release  = "berth"
	readerCR = "berth-berthctl-reader"
)

func TestKubectlBerthNodesAndStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{WithoutDefaultScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	for _, n := range []cluster.NodeSpec{
		{Name: "ctl-busy", CPU: "8", Memory: "16Gi", Labels: map[string]string{"berthctl-e2e": "yes", "berth.dev/instance-class": "gold"}},
		{Name: "ctl-idle", CPU: "8", Memory: "16Gi", Labels: map[string]string{"berthctl-e2e": "yes"}},
		{Name: "ctl-never", CPU: "4", Memory: "8Gi", Labels: map[string]string{"berthctl-e2e": "no"}},
	} {
		if err := c.AddNodes(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// ctl-never has no agent: the watcher lists it (it watches the cluster's nodes) as never
	// reported.
	st, err := stack.Start(ctx, c, stack.Options{Prefix: "berthctl-", Nodes: []stack.NodeLoad{
		{Name: "ctl-busy", CPU: 60, Memory: 40}, {Name: "ctl-idle", CPU: 10, Memory: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	// The NodeImages CRD and ctl-busy's inventory, as its agent would publish it.
	if err := framework.InstallNodeImagesCRD(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.WriteNodeImages(ctx, dyn, "ctl-busy", framework.NodeImage{Tags: []string{"docker.io/library/busybox:1.36"}, Size: 4 << 20},
		framework.NodeImage{Tags: []string{"docker.io/library/nginx:1.27"}, Size: 70 << 20}); err != nil {
		t.Fatal(err)
	}
	// A pod bound to ctl-idle asking for half its CPU: reserved, barely used.
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reserved"}, Spec: corev1.PodSpec{NodeName: "ctl-idle",
		Containers: []corev1.Container{{Name: "c", Image: "registry.example/idle:1", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	run := func(kubeconfig string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl-berth"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl-berth: %v", err)
		}
		if strings.Contains(errb.String(), "goroutine ") {
			t.Fatalf("stack trace from kubectl-berth %v:\n%s", args, errb.String())
		}
		return out.String(), errb.String(), code
	}
	// The watcher serves only tokens it can check: kubectl berth mints one of the chart's
	// reader account (applied from the chart below), for the audience this process watcher
	// reviews against (it runs without --token-audience: the API server's).
	applyChartReaderAccount(ctx, t, c)
	watcher := []string{"--watcher-url", st.Watcher.URL, "--watcher-reader", "berth-berthctl",
		"--watcher-token-audience", "https://kubernetes.default.svc.cluster.local"}
	nodesJSON := func(kubeconfig string, extra ...string) berthctl.NodesView {
		t.Helper()
		out, errs, code := run(kubeconfig, append(append([]string{"nodes", "-o", "json"}, watcher...), extra...)...)
		if code != 0 {
			t.Fatalf("kubectl berth nodes: exit %d: %s", code, errs)
		}
		var v berthctl.NodesView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v in:\n%s", err, out)
		}
		return v
	}

	t.Run("nodes reads measured, requested, freshness and class from the running system", func(t *testing.T) {
		v := nodesJSON(c.Kubeconfig)
		by := map[string]berthctl.NodeView{}
		for _, n := range v.Nodes {
			by[n.Name] = n
		}
		near := func(p *float64, want float64) bool { return p != nil && math.Abs(*p-want) <= 1.5 }
		busy, idle, never := by["ctl-busy"], by["ctl-idle"], by["ctl-never"]
		if busy.Load != berthctl.Fresh || !near(busy.CPU.Average, 60) || !near(busy.CPU.Latest, 60) || busy.InstanceClass != "gold" || busy.CPU.RequestedPercent != 0 ||
			busy.Images == nil || busy.Images.Count != 2 || !busy.Images.Ready {
			t.Errorf("ctl-busy: %+v (cpu %v/%v)", busy, busy.CPU.Average, busy.CPU.Latest)
		}
		if idle.Load != berthctl.Fresh || !near(idle.CPU.Average, 10) || idle.CPU.RequestedPercent != 50 || idle.Memory.RequestedPercent != 25 {
			t.Errorf("ctl-idle: %+v (cpu avg %v)", idle, idle.CPU.Average)
		}
		if idle.AgeSeconds == nil || *idle.AgeSeconds > 30 {
			t.Errorf("ctl-idle's data is %v s old, the agent reports every second", idle.AgeSeconds)
		}
		if never.Load != berthctl.Missing || never.CPU.Average != nil || never.AgeSeconds != nil || never.Images != nil {
			t.Errorf("ctl-never (no agent): %+v", never)
		}
		if v.Watcher.Source != "BerthAgent" || v.Watcher.From != "load watcher "+strings.TrimPrefix(st.Watcher.URL, "http://") {
			t.Errorf("watcher %+v", v.Watcher)
		}
	})

	t.Run("selector and sort order", func(t *testing.T) {
		v := nodesJSON(c.Kubeconfig, "-l", "berthctl-e2e=yes", "--sort-by", "cpu")
		var names []string
		for _, n := range v.Nodes {
			names = append(names, n.Name)
		}
		if strings.Join(names, " ") != "ctl-busy ctl-idle" {
			t.Errorf("nodes -l berthctl-e2e=yes --sort-by cpu: %v", names)
		}
		out, errs, code := run(c.Kubeconfig, append([]string{"nodes", "-o", "wide", "--sort-by", "cpu-requests"}, watcher...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		lines := strings.Split(out, "\n")
		if !strings.HasPrefix(lines[0], "NODE") || !strings.Contains(lines[0], "CLASS") || !strings.HasPrefix(lines[1], "ctl-idle ") {
			t.Errorf("wide table, ctl-idle (50%% requested) first:\n%s", out)
		}
		// ctl-idle: 10 % measured of 50 % requested → 2 cells used, 8 reserved and idle.
		if !strings.Contains(lines[1], "[##--------..........]") {
			t.Errorf("ctl-idle's bar:\n%s", lines[1])
		}
	})

	t.Run("status with no scheduler running says so and exits 1", func(t *testing.T) {
		out, errs, code := run(c.Kubeconfig, append([]string{"status", "--berth-namespace", berthNS}, watcher...)...)
		if code != 1 {
			t.Fatalf("exit %d, want 1 (a failed check): %s\n%s", code, out, errs)
		}
		for _, want := range []string{
			`no Lease "berth-scheduler" in berth-system or kube-system`,
			"2 fresh, 0 stale, 1 missing of 3 nodes",
			"nodeimages.berth.dev",
			"what to do:",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
	})

	dev, err := c.WriteKubeconfig("berthctl-dev", cluster.Identity{User: devUser})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("without RBAC: one sentence, exit 1", func(t *testing.T) {
		for _, args := range [][]string{append([]string{"nodes"}, watcher...), {"nodes"}, {"status"}} {
			out, errs, code := run(dev, args...)
			if code != 1 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 ||
				!strings.Contains(errs, "you may not") || !strings.Contains(errs, "berthctl-reader") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
			}
		}
	})

	t.Run("bound to the chart's berthctl-reader roles, the same caller gets the answer", func(t *testing.T) {
		if err := framework.EnsureNamespace(ctx, c.Client, berthNS); err != nil {
			t.Fatal(err)
		}
		applyChartRoles(ctx, t, c)
		if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "berthctl-dev"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readerCR},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: devUser}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client.RbacV1().RoleBindings(berthNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "berthctl-dev"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: readerCR},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: devUser}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// RBAC is read from an informer: allow it a moment.
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, errs, code := run(dev, append([]string{"nodes", "-o", "json"}, watcher...)...)
			if code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still refused with the chart's roles bound: %s", errs)
			}
			time.Sleep(500 * time.Millisecond)
		}
		if v := nodesJSON(dev); len(v.Nodes) != 3 {
			t.Errorf("dev sees %d nodes, want 3", len(v.Nodes))
		}
		// status reads everything it needs with the same roles (it fails only its checks).
		out, errs, code := run(dev, append([]string{"status", "--berth-namespace", berthNS}, watcher...)...)
		if code != 1 || strings.Contains(errs, "you may not") || !strings.Contains(out, "no Lease") {
			t.Errorf("status as dev: exit %d\n%s\n%s", code, out, errs)
		}
		// Without --watcher-url it looks for the watcher's Service, which this cluster (the
		// watcher is a process) does not have: one sentence, not a refusal.
		_, errs, code = run(dev, "nodes", "--berth-namespace", berthNS)
		if code != 1 || !strings.Contains(errs, "no load watcher Service (app.kubernetes.io/name=berth-loadwatcher) in namespace berth-system") {
			t.Errorf("nodes without a watcher Service: exit %d: %s", code, errs)
		}
		// With the chart's Service (here without endpoints: the watcher is a loopback process)
		// the API server lets the caller through the service proxy — the Role's resourceNames
		// match the proxy's scheme:name:port — and answers that nothing is behind it.
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: berthNS, Name: "berth-loadwatcher",
			Labels: map[string]string{"app.kubernetes.io/name": "berth-loadwatcher"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 2020}}}}
		if _, err := c.Client.CoreV1().Services(berthNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, errs, code = run(dev, "nodes", "--berth-namespace", berthNS)
		if code != 1 || !strings.Contains(errs, "the load watcher service berth-system/berth-loadwatcher has no ready endpoint") {
			t.Errorf("nodes through the service proxy: exit %d: %s", code, errs)
		}
		// A caller with the ClusterRole but not the namespace's Role is refused by the proxy.
		other, err := c.WriteKubeconfig("berthctl-other", cluster.Identity{User: "berthctl-other"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "berthctl-other"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readerCR},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "berthctl-other"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, errs, code = run(other, "nodes", "--berth-namespace", berthNS)
		if code != 1 || !strings.Contains(errs, "you may not list services in berth-system") {
			t.Errorf("nodes without the Role: exit %d: %s", code, errs)
		}
	})

	t.Run("a load watcher of another vendor: one sentence, exit 1", func(t *testing.T) {
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"timestamp":1764000000,"window":{"duration":"15m","start":1763999100,"end":1764000000},"source":"Prometheus","data":{"NodeMetricsMap":{"ctl-busy":{"metrics":[{"name":"cpu","type":"CPU","operator":"AVG","value":42}]}}}}`))
		}))
		defer upstream.Close()
		_, errs, code := run(c.Kubeconfig, "nodes", "--watcher-url", upstream.URL)
		if code != 1 || !strings.Contains(errs, "is not Berth's load watcher (it serves the upstream load-watcher document without berthNodes)") ||
			strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("exit %d: %q", code, errs)
		}
	})
}

// applyChartRoles creates the chart's own berthctl-reader ClusterRole and Role, rendered from
// charts/berth with default values, so the test proves the roles the chart ships suffice.
func applyChartRoles(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	r, err := chart.Render(release, berthNS, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, o := range objs {
		if o.GetName() != readerCR {
			continue
		}
		switch o.GetKind() {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cr); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			found++
		case "Role":
			var ro rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ro); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Client.RbacV1().Roles(berthNS).Create(ctx, &ro, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			found++
		}
	}
	if found != 2 {
		t.Fatalf("the chart renders %d of the ClusterRole and Role %s", found, readerCR)
	}
}

// applyChartReaderAccount creates the chart's kubectl berth reader account, its ClusterRole (get
// nodeloads, not nodeloads/pods) and binding, rendered from charts/berth with default values.
func applyChartReaderAccount(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if err := framework.EnsureNamespace(ctx, c.Client, berthNS); err != nil {
		t.Fatal(err)
	}
	r, err := chart.Render(release, berthNS, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, o := range objs {
		if o.GetName() != "berth-berthctl" && o.GetName() != "berth-berthctl-load" {
			continue
		}
		var err error
		switch o.GetKind() {
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sa); err == nil {
				_, err = c.Client.CoreV1().ServiceAccounts(berthNS).Create(ctx, &sa, metav1.CreateOptions{})
			}
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cr); err == nil {
				_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{})
			}
		case "ClusterRoleBinding":
			var crb rbacv1.ClusterRoleBinding
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crb); err == nil {
				_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &crb, metav1.CreateOptions{})
			}
		default:
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		found++
	}
	if found != 3 {
		t.Fatalf("the chart renders %d of kubectl berth's reader ServiceAccount, ClusterRole and binding", found)
	}
}
