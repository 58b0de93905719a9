// Package tenant attacks PodConfig as a namespace tenant would: a ServiceAccount bound only to
// the built-in edit ClusterRole in its namespace (the chart folds podconfigs into edit), on the
// local cluster's real node, against the real berth-operator and berth-agent. Every attack of
// issue 20 gets a clear refusal or a status naming the reason, and the suite then checks the
// node: no address, route or link was added to anything the agent did not create. A granted
// tenant's attachment works beside it, so the refusals are not a system that refuses everything.
// Needs root (real node).
package tenant

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/agent/podnet"
)

const (
	realNode = "berth-real"
	attacker = "red"  // mallory's namespace
	victim   = "blue" // the granted tenant's namespace
)

type env struct {
	ctx    context.Context
	c      *cluster.Cluster
	rn     *cluster.RealNode
	admin  client.Client
	tenant client.Client // mallory: edit in red, nothing else
	tdyn   dynamic.Interface
}

func TestTenantAttacks(t *testing.T) {
	framework.NeedRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := framework.StartPodConfigCluster(ctx, t, realNode)
	e := &env{ctx: ctx, c: c, rn: c.RealNode()}
	var err error
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = rbacv1.AddToScheme(s)
	_ = berthv1alpha1.AddToScheme(s)
	if e.admin, err = client.New(c.RESTConfig, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	agentRole := e.applyChartRBAC(t)
	for ns, team := range map[string]string{attacker: "red", victim: "blue"} {
		if err := e.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": team}}}); err != nil {
			t.Fatal(err)
		}
	}
	e.tenant, e.tdyn = e.tenantClients(t, s)
	if err := framework.PodConfigAgentRBAC(ctx, c, agentRole); err != nil {
		t.Fatal(err)
	}
	// The node's pod range, as a controller-manager allocating node CIDRs would set it; the
	// operator runs without configured cluster CIDRs, so what it refuses below it discovered
	// (this podCIDR, the API server's ServiceCIDR).
	if err := e.admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: realNode}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"podCIDR":"10.244.0.0/24","podCIDRs":["10.244.0.0/24"]}}`))); err != nil {
		t.Fatal(err)
	}
	op, err := framework.StartPodConfigOperator(ctx, c, "berth-operator", "--podconfig-cluster-cidrs=")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := framework.StartPodConfigAgent(ctx, c, "berth-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log tail:\n%s", agent.Tail(60))
			t.Logf("operator log tail:\n%s", op.Tail(40))
		}
	})

	// The granted network, and a pod in each namespace that PodConfigs there select.
	e.createNetwork(t, "blue-net", "berth-blue", "192.168.61.0/24", "192.168.61.1", map[string]string{"team": "blue"}, nil)
	e.waitAccepted(t, "blue-net", true, "")
	for _, ns := range []string{attacker, victim} {
		p := framework.NetechoPod(ns, "app", realNode, map[string]string{berthv1alpha1.PodConfigLabel: "net"})
		if err := e.admin.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := framework.WaitPods(ctx, c.Client, ns, berthv1alpha1.PodConfigLabel+"=net", 1, time.Minute, framework.Running); err != nil {
			t.Fatal(err)
		}
	}
	// An administrator's bridge on the node, named inside Berth's prefix but not made by Berth
	// (what the CNI bridge was before it was renamed): it must stay exactly as it is.
	if _, err := e.rn.InNetNS(ctx, "sh", "-c", "ip link add berth-adm type bridge && ip addr add 172.31.9.1/24 dev berth-adm && ip link set berth-adm up"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = e.rn.InNetNS(context.Background(), "ip", "link", "del", "berth-adm") }()
	before := e.unmarkedState(t)

	t.Run("the tenant's own rights: PodConfigs yes, networks, pools, status and namespace labels no", e.testRights)
	t.Run("a tenant names no bridge, range or gateway: the old fields are refused by the schema", e.testNoHostFields)
	t.Run("another tenant's network: refused in status naming the field, nothing allocated", e.testAnotherTenantsNetwork)
	t.Run("ranges no network may use are refused at admission (CEL), naming the rule", e.testNeverRanges)
	t.Run("the cluster's own ranges are refused in status (discovered and configured)", e.testClusterRanges)
	t.Run("a refused network squats nothing", e.testSquatting)
	t.Run("a bridge the agent did not make is never joined, whatever the network says", e.testForeignBridge)
	t.Run("the granted tenant's attachment works, and goes without a trace", e.testGranted)
	t.Run("the node: nothing the agent did not create gained an address, route or port", func(t *testing.T) {
		after := e.unmarkedState(t)
		if d := diff(before, after); d != "" {
			t.Fatalf("the node's own links, addresses or routes changed:\n%s", d)
		}
	})
}

// applyChartRBAC creates the chart's tenant ClusterRoles (aggregated into edit/view) and
// returns its agent ClusterRole: the suite proves what the chart grants, not a role of its own.
func (e *env) applyChartRBAC(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	r, err := chart.Render("berth", "berth-system", map[string]any{
		"podConfig": map[string]any{"enabled": true, "clusterCIDRs": []any{"10.244.0.0/16"}},
		"agent":     map[string]any{"criSocket": e.rn.ContainerdSocket}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var agent *rbacv1.ClusterRole
	tenantRoles := 0
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			t.Fatal(err)
		}
		switch {
		case role.Name == "berth-agent":
			agent = &role
		case strings.HasPrefix(role.Name, "berth-podconfig-"):
			tenantRoles++
			if err := e.admin.Create(e.ctx, &role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if agent == nil || tenantRoles != 2 {
		t.Fatalf("the chart renders agent role %v and %d tenant roles, want both tenant roles", agent != nil, tenantRoles)
	}
	return agent
}

// tenantClients creates mallory (a ServiceAccount in red bound to the built-in edit role there)
// and returns clients that impersonate her, as her token would.
func (e *env) tenantClients(t *testing.T, s *runtime.Scheme) (client.Client, dynamic.Interface) {
	t.Helper()
	if err := e.admin.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "mallory"}}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "mallory-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: attacker, Name: "mallory"}}}
	if err := e.admin.Create(e.ctx, rb); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(e.c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + attacker + ":mallory",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + attacker, "system:authenticated"}}
	cl, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The aggregation controller folds the chart's role into edit asynchronously.
	err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var l berthv1alpha1.PodConfigList
		return cl.List(ctx, &l, client.InNamespace(attacker)) == nil, nil
	})
	if err != nil {
		t.Fatalf("edit never allowed listing podconfigs: %v", err)
	}
	return cl, dyn
}

func (e *env) createNetwork(t *testing.T, name, bridge, cidr, gw string, sel map[string]string, routes []berthv1alpha1.Route) {
	t.Helper()
	if err := e.admin.Create(e.ctx, network(name, bridge, cidr, gw, sel, routes)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.admin.Delete(context.Background(), &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

func network(name, bridge, cidr, gw string, sel map[string]string, routes []berthv1alpha1.Route) *berthv1alpha1.PodNetwork {
	return &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1alpha1.PodNetworkSpec{Bridge: bridge, CIDR: cidr, Gateway: gw, Routes: routes,
			NamespaceSelector: metav1.LabelSelector{MatchLabels: sel}}}
}

// waitAccepted waits for the operator's decision on a network and checks it.
func (e *env) waitAccepted(t *testing.T, name string, want bool, wantMsg string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pn := &berthv1alpha1.PodNetwork{}
		if err := e.admin.Get(ctx, client.ObjectKey{Name: name}, pn); err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionAccepted)
		if c == nil {
			return false, nil
		}
		last = fmt.Sprintf("%s %s", c.Status, c.Message)
		return (c.Status == metav1.ConditionTrue) == want && strings.Contains(c.Message, wantMsg), nil
	})
	if err != nil {
		t.Fatalf("network %s: want accepted=%v with %q, got %s", name, want, wantMsg, last)
	}
}

func podConfig(ns, name string, atts ...berthv1alpha1.NetworkAttachment) *berthv1alpha1.PodConfig {
	return &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: berthv1alpha1.PodConfigSpec{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{berthv1alpha1.PodConfigLabel: "net"}},
			NetworkAttachments: atts}}
}

// waitPodConfig polls a PodConfig until ok says it is where it should be.
func (e *env) waitPodConfig(t *testing.T, ns, name string, ok func(*berthv1alpha1.PodConfig) bool) *berthv1alpha1.PodConfig {
	t.Helper()
	return framework.WaitPodConfig(e.ctx, t, e.admin, ns, name, "the expected status", 60*time.Second, ok)
}

func degradedWith(msgs ...string) func(*berthv1alpha1.PodConfig) bool {
	return func(pc *berthv1alpha1.PodConfig) bool {
		d := meta.FindStatusCondition(pc.Status.Conditions, berthv1alpha1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || pc.Status.Phase != berthv1alpha1.PodConfigFailed {
			return false
		}
		for _, m := range msgs {
			if !strings.Contains(d.Message, m) {
				return false
			}
		}
		return true
	}
}

func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: want Forbidden, got %v", what, err)
	}
}

func (e *env) testRights(t *testing.T) {
	pc := podConfig(attacker, "probe", berthv1alpha1.NetworkAttachment{Name: "net1", Network: "blue-net"})
	if err := e.tenant.Create(e.ctx, pc); err != nil {
		t.Fatalf("edit must be able to create a PodConfig in its own namespace: %v", err)
	}
	defer func() { _ = e.admin.Delete(context.Background(), pc) }()
	forbidden(t, "a PodConfig in another namespace", e.tenant.Create(e.ctx, podConfig(victim, "probe", berthv1alpha1.NetworkAttachment{Name: "net1", Network: "blue-net"})))
	forbidden(t, "a PodNetwork on the metadata address", e.tenant.Create(e.ctx, network("mine", "berth-md", "169.254.169.0/24", "169.254.169.254", nil, nil)))
	forbidden(t, "a PodNetwork granting itself", e.tenant.Create(e.ctx, network("mine", "berth-mine", "192.168.70.0/24", "", map[string]string{"team": "red"}, nil)))
	forbidden(t, "an IPAllocation", e.tenant.Create(e.ctx, &berthv1alpha1.IPAllocation{ObjectMeta: metav1.ObjectMeta{Name: "blue-net"},
		Spec: berthv1alpha1.IPAllocationSpec{Master: "berth-blue", CIDR: "192.168.61.0/24"}}))
	ns := &corev1.Namespace{}
	if err := e.admin.Get(e.ctx, client.ObjectKey{Name: attacker}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels["team"] = "blue"
	forbidden(t, "relabelling its namespace into another tenant's grant", e.tenant.Update(e.ctx, ns))
	// The agent acts on status entries: a tenant writing its own must be refused.
	status := &unstructured.Unstructured{Object: map[string]any{"apiVersion": berthv1alpha1.GroupVersion.String(), "kind": "PodConfig",
		"metadata": map[string]any{"namespace": attacker, "name": "probe"},
		"status": map[string]any{"pods": []any{map[string]any{"pod": "app", "attachment": "net1", "podUID": "x", "node": realNode,
			"address": "192.168.61.77/24", "bridge": "berth-blue", "state": "Allocated"}}}}}
	_, err := e.tdyn.Resource(podnet.PodConfigGVR).Namespace(attacker).ApplyStatus(e.ctx, "probe", status, metav1.ApplyOptions{FieldManager: "mallory", Force: true})
	forbidden(t, "writing PodConfig status", err)
}

func (e *env) testNoHostFields(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": berthv1alpha1.GroupVersion.String(), "kind": "PodConfig",
		"metadata": map[string]any{"namespace": attacker, "name": "cni"},
		"spec":     map[string]any{"networkAttachments": []any{map[string]any{"name": "net1", "master": cluster.RealNodeBridge, "cidr": "192.168.53.0/24", "gateway": "192.168.53.1"}}}}}
	res := e.tdyn.Resource(podnet.PodConfigGVR).Namespace(attacker)
	for _, tc := range []struct {
		validation string
		want       string
	}{
		{"Strict", `unknown field "spec.networkAttachments[0].master"`},
		// Without strict validation the API server drops unknown fields: the attachment then
		// names no network, which the schema requires.
		{"Ignore", "spec.networkAttachments[0].network: Required value"},
	} {
		_, err := res.Create(e.ctx, obj, metav1.CreateOptions{FieldValidation: tc.validation})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("fieldValidation=%s: want an error containing %q, got %v", tc.validation, tc.want, err)
			_ = res.Delete(e.ctx, "cni", metav1.DeleteOptions{})
		}
	}
}

func (e *env) testAnotherTenantsNetwork(t *testing.T) {
	pc := podConfig(attacker, "steal", berthv1alpha1.NetworkAttachment{Name: "net1", Network: "blue-net"})
	if err := e.tenant.Create(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
	defer e.deleteAndWait(t, pc)
	got := e.waitPodConfig(t, attacker, "steal", degradedWith("spec.networkAttachments[0].network",
		"PodNetwork blue-net does not grant namespace red"))
	if len(got.Status.Pods) != 0 {
		t.Errorf("entries for a refused PodConfig: %+v", got.Status.Pods)
	}
	// Held a little longer than one reconcile: nothing may appear later either.
	time.Sleep(2 * time.Second)
	pool := &berthv1alpha1.IPAllocation{}
	if err := e.admin.Get(e.ctx, client.ObjectKey{Name: "blue-net"}, pool); err == nil {
		for _, a := range pool.Spec.Allocations {
			if a.PodNamespace == attacker {
				t.Errorf("the attacker got an address on blue-net: %+v", a)
			}
		}
	}
}

func (e *env) testNeverRanges(t *testing.T) {
	for _, tc := range []struct {
		name, cidr, gw string
		routes         []berthv1alpha1.Route
		want           string
	}{
		{"the cloud metadata address", "169.254.169.0/24", "169.254.169.254", nil, "169.254.169.254"},
		{"loopback", "127.0.0.0/8", "", nil, "loopback"},
		{"inside loopback", "127.3.0.0/16", "", nil, "loopback"},
		{"multicast", "239.1.0.0/16", "", nil, "multicast"},
		{"all multicast (wider than a /8)", "224.0.0.0/4", "", nil, "at most a /8"},
		{"IPv6 link-local", "fe80::/64", "", nil, "link-local"},
		{"IPv6 loopback", "::1/128", "", nil, "loopback"},
		{"IPv6 default", "::/0", "", nil, "at most a /8"},
		{"unspecified", "0.0.0.0/8", "", nil, "unspecified"},
		{"a default route through the attachment", "192.168.80.0/24", "192.168.80.1", []berthv1alpha1.Route{{Destination: "0.0.0.0/0"}}, "default routes"},
		{"a route to the metadata address", "192.168.80.0/24", "192.168.80.1", []berthv1alpha1.Route{{Destination: "169.254.169.254/32"}}, "169.254.169.254"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.admin.Create(e.ctx, network("never", "berth-never", tc.cidr, tc.gw, nil, tc.routes))
			if err == nil {
				_ = e.admin.Delete(e.ctx, &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "never"}})
				t.Fatalf("accepted")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want Invalid containing %q, got %v", tc.want, err)
			}
		})
	}
}

func (e *env) testClusterRanges(t *testing.T) {
	for _, tc := range []struct {
		name, cidr string
		routes     []berthv1alpha1.Route
		want       string
	}{
		{"the service range (discovered ServiceCIDR)", "10.96.200.0/24", nil, "spec.cidr: Forbidden: 10.96.200.0/24 overlaps the service range (ServiceCIDR kubernetes)"},
		{"the real node's pod range (discovered podCIDR)", "10.244.0.0/24", nil, "spec.cidr: Forbidden: 10.244.0.0/24 overlaps the pod range of node " + realNode},
		{"a route to the service range", "192.168.81.0/24", []berthv1alpha1.Route{{Destination: "10.96.0.0/16"}}, "spec.routes[0].destination: Forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "cluster-" + strings.ReplaceAll(strings.ReplaceAll(tc.cidr, ".", "-"), "/", "-")
			e.createNetwork(t, name, "berth-cl", tc.cidr, "", map[string]string{"team": "red"}, tc.routes)
			e.waitAccepted(t, name, false, tc.want)
			// A tenant it grants gets nothing from it.
			pc := podConfig(attacker, "cluster", berthv1alpha1.NetworkAttachment{Name: "net1", Network: name})
			if err := e.tenant.Create(e.ctx, pc); err != nil {
				t.Fatal(err)
			}
			defer e.deleteAndWait(t, pc)
			e.waitPodConfig(t, attacker, "cluster", degradedWith("spec.networkAttachments[0].network", "not accepted"))
			if err := e.admin.Delete(e.ctx, &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
				t.Fatal(err)
			}
			e.waitGone(t, &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
	}
}

func (e *env) testSquatting(t *testing.T) {
	e.createNetwork(t, "squat", "berth-sq", "10.96.5.0/24", "", map[string]string{"team": "red"}, nil)
	e.waitAccepted(t, "squat", false, "ServiceCIDR")
	e.createNetwork(t, "after-squat", "berth-sq", "192.168.62.0/24", "", map[string]string{"team": "red"}, nil)
	e.waitAccepted(t, "after-squat", true, "")
	// And the bridge really is the later network's: the squatter's refusal did not hold it.
	pn := &berthv1alpha1.PodNetwork{}
	if err := e.admin.Get(e.ctx, client.ObjectKey{Name: "squat"}, pn); err != nil {
		t.Fatal(err)
	}
	if ok, why := acceptedOf(pn); ok || strings.Contains(why, "berth-sq") {
		t.Errorf("the squatter: accepted=%v %q; want refused for its range only", ok, why)
	}
}

func acceptedOf(pn *berthv1alpha1.PodNetwork) (bool, string) {
	c := meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionAccepted)
	if c == nil {
		return false, ""
	}
	return c.Status == metav1.ConditionTrue, c.Message
}

func (e *env) testForeignBridge(t *testing.T) {
	// An administrator's mistake (or an attacker who got a network granted): a network on the
	// bridge berth-adm, which exists on the node and which Berth did not make.
	e.createNetwork(t, "adm", "berth-adm", "192.168.63.0/24", "192.168.63.1", map[string]string{"team": "red"}, nil)
	e.waitAccepted(t, "adm", true, "")
	pc := podConfig(attacker, "adm", berthv1alpha1.NetworkAttachment{Name: "net1", Network: "adm"})
	if err := e.tenant.Create(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
	defer e.deleteAndWait(t, pc)
	got := e.waitPodConfig(t, attacker, "adm", func(pc *berthv1alpha1.PodConfig) bool {
		return len(pc.Status.Pods) == 1 && pc.Status.Pods[0].State == berthv1alpha1.AttachmentFailed
	})
	if msg := got.Status.Pods[0].LastError; !strings.Contains(msg, "bridge berth-adm") || !strings.Contains(msg, "not created by Berth") {
		t.Errorf("lastError %q: want it to name bridge berth-adm as not Berth's", msg)
	}
	out, err := e.rn.InNetNS(e.ctx, "ip", "-o", "addr", "show", "dev", "berth-adm")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "192.168.63.1") {
		t.Errorf("the gateway was added to the administrator's bridge:\n%s", out)
	}
	ports, err := e.rn.InNetNS(e.ctx, "ip", "-o", "link", "show", "master", "berth-adm")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(ports) != "" {
		t.Errorf("the administrator's bridge got ports:\n%s", ports)
	}
}

func (e *env) testGranted(t *testing.T) {
	pc := podConfig(victim, "net", berthv1alpha1.NetworkAttachment{Name: "net1", Network: "blue-net"})
	if err := e.admin.Create(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
	got := e.waitPodConfig(t, victim, "net", func(pc *berthv1alpha1.PodConfig) bool {
		return pc.Status.Phase == berthv1alpha1.PodConfigConfigured && len(pc.Status.Pods) == 1
	})
	en := got.Status.Pods[0]
	if en.Network != "blue-net" || en.Bridge != "berth-blue" || !strings.HasPrefix(en.Address, "192.168.61.") {
		t.Errorf("entry %+v: want blue-net on berth-blue with an address of 192.168.61.0/24", en)
	}
	// Berth's bridge carries Berth's mark: the node says so.
	out, err := e.rn.InNetNS(e.ctx, "ip", "-d", "link", "show", "berth-blue")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, fmt.Sprintf("group %d", podnet.LinkGroup)) {
		t.Errorf("berth-blue without the agent's mark:\n%s", out)
	}
	e.deleteAndWait(t, pc)
	if _, err := e.rn.InNetNS(e.ctx, "ip", "link", "show", "berth-blue"); err == nil {
		t.Error("berth-blue stayed after its last attachment went")
	}
}

func (e *env) deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.admin.Delete(e.ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	e.waitGone(t, obj)
}

func (e *env) waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(e.admin.Get(ctx, client.ObjectKeyFromObject(obj), obj)), nil
	})
	if err != nil {
		t.Fatalf("%s %s never went: %v", obj.GetObjectKind().GroupVersionKind().Kind, client.ObjectKeyFromObject(obj), err)
	}
}

var groupRE = regexp.MustCompile(`\bgroup (\S+)`)

// unmarkedState is every link of the node's namespace without the agent's mark, with its
// addresses and the routes through it: what no attack may change. Counters and timers that
// change on their own are left out.
func (e *env) unmarkedState(t *testing.T) []string {
	t.Helper()
	links, err := e.rn.InNetNS(e.ctx, "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	mark := fmt.Sprint(podnet.LinkGroup)
	var out []string
	marked := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(links), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		if m := groupRE.FindStringSubmatch(l); m != nil && m[1] == mark {
			marked[name] = true
			continue
		}
		// The master a link is enslaved to is what matters; its flags and state change with
		// carrier.
		master := ""
		if i := slices.Index(f, "master"); i >= 0 && i+1 < len(f) {
			master = f[i+1]
		}
		out = append(out, "link "+name+" master="+master)
	}
	for _, args := range [][]string{{"-o", "addr", "show"}, {"route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"}} {
		s, err := e.rn.InNetNS(e.ctx, "ip", args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			f := strings.Fields(l)
			skip := false
			for i, w := range f {
				if (w == "dev" && i+1 < len(f) && marked[f[i+1]]) || (args[0] == "-o" && i == 1 && marked[w]) {
					skip = true
				}
			}
			// IPv6 link-local addresses and their routes are the kernel's own, made a moment
			// after a link comes up; nobody adds them.
			if skip || l == "" || strings.Contains(l, "fe80::") {
				continue
			}
			if args[0] == "-o" && len(f) >= 4 {
				l = f[1] + " " + f[2] + " " + f[3] // link, family, address
			}
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	sort.Strings(out)
	return out
}

func diff(before, after []string) string {
	var b strings.Builder
	for _, l := range after {
		if !slices.Contains(before, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	for _, l := range before {
		if !slices.Contains(after, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	return b.String()
}
