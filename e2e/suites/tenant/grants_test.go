package tenant

// TestTenantSeesItsGrants (issue 35, "tenants can see their grants"): on the real API server,
// with the real berth-operator running under the chart's own operator ClusterRole, a tenant
// bound only to the built-in edit role (plus the chart's aggregated grants-view role) reads the
// PodNetworks and InstanceClasses granted to its namespace from its Grants object, finds nothing
// about another tenant's, and can neither read another namespace's Grants nor create, change or
// delete its own. Needs no node.

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-sched/berth/api/crds"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

const grantsOperatorUser = "berth-operator-chart-identity"

func TestTenantSeesItsGrants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{Logf: t.Logf, WithoutKWOK: true, WithoutDefaultScheduler: true})
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = rbacv1.AddToScheme(s)
	_ = berthv1alpha1.AddToScheme(s)
	admin, err := client.New(c.RESTConfig, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	grantsInstallCRDs(ctx, t, c)
	opKubeconfig := applyChartGrantsRBAC(ctx, t, c, admin)

	for _, n := range []struct{ name, team string }{{"blue", "blue"}, {"red", "red"}, {"green", "green"}} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"team": n.team}}}); err != nil {
			t.Fatal(err)
		}
	}
	mtu := int32(1400)
	blueNet := framework.NewPodNetwork("blue-net", "berth-bluegr", "192.168.71.0/24", "192.168.71.1", map[string]string{"team": "blue"})
	blueNet.Spec.MTU = &mtu
	for _, o := range []client.Object{
		blueNet,
		framework.NewPodNetwork("red-net", "berth-redgr", "192.168.72.0/24", "192.168.72.1", map[string]string{"team": "red"}),
		&berthv1alpha1.InstanceClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Spec: berthv1alpha1.InstanceClassSpec{Namespaces: []string{"blue", "green"}}},
		&berthv1alpha1.InstanceClass{ObjectMeta: metav1.ObjectMeta{Name: "ruby"}, Spec: berthv1alpha1.InstanceClassSpec{Namespaces: []string{"red", "ghost"}}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	// The operator as the chart runs it (--podconfig --grants), with the chart's ClusterRole
	// alone: the Grants controller needs nothing the chart does not grant.
	op, err := framework.StartPodConfigOperator(ctx, c, "berth-operator", "--grants", "--kubeconfig="+opKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log tail:\n%s", op.Tail(60))
		}
	})
	alice := grantsTenant(ctx, t, c, admin, s, "blue", "alice")

	// The tenant lists its grants: its network (decided, with what a PodConfig needs) and its
	// shared class (how many others share it, not who).
	var mine berthv1alpha1.Grants
	grantsWait(ctx, t, "blue's Grants to show blue-net Accepted and class gold", func() (bool, string) {
		var l berthv1alpha1.GrantsList
		if err := alice.List(ctx, &l, client.InNamespace("blue")); err != nil {
			return false, err.Error()
		}
		if len(l.Items) != 1 {
			return false, "items: " + grantsNames(l.Items)
		}
		mine = l.Items[0]
		st := mine.Status
		return len(st.Networks) == 1 && st.Networks[0].State == berthv1alpha1.GrantedNetworkAccepted &&
			len(st.InstanceClasses) == 1, grantsJSON(st)
	})
	n := mine.Status.Networks[0]
	if mine.Name != berthv1alpha1.GrantsName || n.Name != "blue-net" || n.CIDR != "192.168.71.0/24" || n.Gateway != "192.168.71.1" || n.MTU == nil || *n.MTU != 1400 {
		t.Errorf("blue's network = %s", grantsJSON(mine))
	}
	if cl := mine.Status.InstanceClasses[0]; cl.Name != "gold" || cl.SharedWith != 1 {
		t.Errorf("blue's class = %+v, want gold shared with 1", cl)
	}
	if c := meta.FindStatusCondition(mine.Status.Conditions, berthv1alpha1.ConditionComplete); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Complete = %+v", c)
	}
	if mine.Status.OwnClasses == "" {
		t.Error("no ownClasses statement")
	}
	// Nothing about the other tenants: not their network, class, range or namespace names.
	for _, leak := range []string{"red-net", "ruby", "192.168.72.", "green", "ghost", `"red"`} {
		if strings.Contains(grantsJSON(mine), leak) {
			t.Errorf("blue's Grants mentions %q: %s", leak, grantsJSON(mine))
		}
	}

	// What stays closed to the tenant: other namespaces' grants, the cluster-scoped grants
	// themselves, and every write to its own view.
	forged := &berthv1alpha1.Grants{ObjectMeta: metav1.ObjectMeta{Namespace: "blue", Name: "grants-2"}}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"list red's Grants", func() error { return alice.List(ctx, &berthv1alpha1.GrantsList{}, client.InNamespace("red")) }},
		{"list Grants in every namespace", func() error { return alice.List(ctx, &berthv1alpha1.GrantsList{}) }},
		{"list PodNetworks", func() error { return alice.List(ctx, &berthv1alpha1.PodNetworkList{}) }},
		{"list InstanceClasses", func() error { return alice.List(ctx, &berthv1alpha1.InstanceClassList{}) }},
		{"create a Grants object", func() error { return alice.Create(ctx, forged) }},
		{"update its Grants", func() error {
			g := mine.DeepCopy()
			g.Labels = map[string]string{"forged": "yes"}
			return alice.Update(ctx, g)
		}},
		{"update its Grants' status", func() error {
			g := mine.DeepCopy()
			g.Status.Networks = append(g.Status.Networks, berthv1alpha1.GrantedNetwork{Name: "red-net", CIDR: "192.168.72.0/24", State: "Accepted"})
			return alice.Status().Update(ctx, g)
		}},
		{"patch its Grants' status", func() error {
			return alice.Status().Patch(ctx, mine.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"ownClasses":"forged"}}`)))
		}},
		{"delete its Grants", func() error { return alice.Delete(ctx, mine.DeepCopy()) }},
	} {
		err := tc.do()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", tc.name, err)
		}
	}

	// The same through the real `kubectl berth grants`, with alice's own token.
	runBerthGrants(ctx, t, c, "blue", "alice")

	// InstanceClass status: Granted names the namespace that does not exist, until it does.
	waitClass := func(want metav1.ConditionStatus, msg string) {
		t.Helper()
		grantsWait(ctx, t, "InstanceClass ruby Granted "+string(want), func() (bool, string) {
			ic := &berthv1alpha1.InstanceClass{}
			if err := admin.Get(ctx, client.ObjectKey{Name: "ruby"}, ic); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(ic.Status.Conditions, berthv1alpha1.ConditionGranted)
			return c != nil && c.Status == want && strings.Contains(c.Message, msg) && ic.Status.ObservedGeneration == ic.Generation, grantsJSON(ic.Status)
		})
	}
	waitClass(metav1.ConditionFalse, "namespaces ghost do not exist")
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ghost"}}); err != nil {
		t.Fatal(err)
	}
	waitClass(metav1.ConditionTrue, "shared by namespaces red, ghost")
	// ghost is granted ruby and nothing else: its own Grants appears.
	grantsWaitObject(ctx, t, admin, "ghost", func(g *berthv1alpha1.Grants) bool {
		return g != nil && len(g.Status.InstanceClasses) == 1 && g.Status.InstanceClasses[0].Name == "ruby" && len(g.Status.Networks) == 0
	})

	// An administrator's delete of a Grants object is undone: the operator is its only writer.
	if err := admin.Delete(ctx, &berthv1alpha1.Grants{ObjectMeta: metav1.ObjectMeta{Namespace: "red", Name: berthv1alpha1.GrantsName}}); err != nil {
		t.Fatal(err)
	}
	grantsWaitObject(ctx, t, admin, "red", func(g *berthv1alpha1.Grants) bool {
		return g != nil && g.DeletionTimestamp.IsZero() && len(g.Status.Networks) == 1 && g.Status.Networks[0].Name == "red-net"
	})
	// Only "grants" is a Grants object's name, for the administrator too.
	if err := admin.Create(ctx, &berthv1alpha1.Grants{ObjectMeta: metav1.ObjectMeta{Namespace: "blue", Name: "other"}}); err == nil ||
		!strings.Contains(err.Error(), "metadata.name must be grants") {
		t.Errorf("a Grants object named other: %v", err)
	}

	// Revocation: the network stops selecting blue and the class no longer lists it; blue is
	// granted nothing, and its Grants goes.
	if err := admin.Patch(ctx, &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "blue-net"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespaceSelector":{"matchLabels":{"team":"nobody"}}}}`))); err != nil {
		t.Fatal(err)
	}
	grantsWaitObject(ctx, t, admin, "blue", func(g *berthv1alpha1.Grants) bool { return g != nil && len(g.Status.Networks) == 0 })
	if err := admin.Patch(ctx, &berthv1alpha1.InstanceClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespaces":["green"]}}`))); err != nil {
		t.Fatal(err)
	}
	grantsWaitObject(ctx, t, admin, "blue", func(g *berthv1alpha1.Grants) bool { return g == nil })
	var l berthv1alpha1.GrantsList
	if err := alice.List(ctx, &l, client.InNamespace("blue")); err != nil || len(l.Items) != 0 {
		t.Errorf("after revocation alice lists %d Grants (%v), want none", len(l.Items), err)
	}
}

// runBerthGrants runs bin/kubectl-berth grants as ServiceAccount ns/name (a token of its own
// in a kubeconfig whose namespace is ns): its namespace's table and json show the network and
// class, another namespace is refused with the sentence that says which role to ask for.
func runBerthGrants(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name string) {
	t.Helper()
	exp := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cl := clientcmdapi.NewCluster()
	cl.Server, cl.CertificateAuthorityData, cl.CertificateAuthority = c.RESTConfig.Host, c.RESTConfig.CAData, c.RESTConfig.CAFile
	cfg.Clusters["local"] = cl
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["tenant"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = "tenant"
	kc := filepath.Join(t.TempDir(), "tenant.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl-berth"), append([]string{"grants", "--kubeconfig", kc}, args...)...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl-berth: %v", err)
		}
		return out.String(), errb.String(), code
	}
	out, errOut, code := run()
	if code != 0 || !strings.Contains(out, "blue-net  Accepted  192.168.71.0/24  192.168.71.1  1400") || !strings.Contains(out, "gold            1 other namespace") {
		t.Errorf("kubectl berth grants (context namespace %s): exit %d\n%s%s", ns, code, out, errOut)
	}
	out, errOut, code = run("-o", "json")
	var v struct {
		Found    bool `json:"found"`
		Networks []struct {
			Name, State string
		} `json:"networks"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || !v.Found || len(v.Networks) != 1 || v.Networks[0].Name != "blue-net" {
		t.Errorf("kubectl berth grants -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	_, errOut, code = run("-n", "red")
	if code != 1 || !strings.Contains(errOut, "error: you may not get grants in namespace red: ask for the built-in view role there") {
		t.Errorf("kubectl berth grants -n red: exit %d, stderr %q", code, errOut)
	}
}

// installBerthCRDs installs every CRD the chart ships (crds/), as helm install does.
func grantsInstallCRDs(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	files, err := crds.Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		crd, err := crds.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := cluster.InstallCRDs(ctx, c.RESTConfig, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// applyChartGrantsRBAC renders the chart with its defaults plus podConfig, creates its
// grants-view ClusterRole (folded into view, edit and admin), checks it grants tenants no
// write verb, binds the chart's operator ClusterRole to grantsOperatorUser, and returns a kubeconfig
// for that user.
func applyChartGrantsRBAC(ctx context.Context, t *testing.T, c *cluster.Cluster, admin client.Client) string {
	t.Helper()
	r, err := chart.Render("berth", "berth-system", map[string]any{"podConfig": map[string]any{"enabled": true},
		"agent": map[string]any{"criSocket": "/run/containerd/containerd.sock"}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var view, op *rbacv1.ClusterRole
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			t.Fatal(err)
		}
		switch role.Name {
		case "berth-grants-view":
			view = &role
		case "berth-operator":
			op = &role
		}
	}
	if view == nil || op == nil {
		t.Fatalf("the chart renders grants-view %v, operator role %v", view != nil, op != nil)
	}
	for _, rule := range view.Rules {
		for _, v := range rule.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Fatalf("the chart's grants-view role grants tenants %q on %v", v, rule.Resources)
			}
		}
	}
	if view.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" || view.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
		t.Fatalf("grants-view does not fold into view and edit: labels %v", view.Labels)
	}
	op.Name = "berth-operator-e2e"
	for _, o := range []client.Object{view, op, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "berth-operator-e2e"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: op.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: grantsOperatorUser}}}} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := c.WriteKubeconfig("berth-operator-chart", cluster.Identity{User: grantsOperatorUser})
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// tenant creates ServiceAccount ns/name bound to the built-in edit role in ns and returns a
// client that impersonates it, once the aggregation controller has folded grants-view into edit.
func grantsTenant(ctx context.Context, t *testing.T, c *cluster.Cluster, admin client.Client, s *runtime.Scheme, ns, name string) client.Client {
	t.Helper()
	if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	cl, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	grantsWait(ctx, t, "edit to allow listing grants (role aggregation)", func() (bool, string) {
		err := cl.List(ctx, &berthv1alpha1.GrantsList{}, client.InNamespace(ns))
		return err == nil, grantsErr(err)
	})
	return cl
}

func grantsWaitObject(ctx context.Context, t *testing.T, admin client.Client, ns string, ok func(*berthv1alpha1.Grants) bool) {
	t.Helper()
	grantsWait(ctx, t, ns+"'s Grants", func() (bool, string) {
		g := &berthv1alpha1.Grants{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: berthv1alpha1.GrantsName}, g)
		if apierrors.IsNotFound(err) {
			return ok(nil), "absent"
		}
		if err != nil {
			return false, err.Error()
		}
		return ok(g), grantsJSON(g.Status)
	})
}

func grantsWait(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		ok, l := cond()
		last = l
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
	}
}

func grantsNames(gs []berthv1alpha1.Grants) string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Namespace+"/"+g.Name)
	}
	return strings.Join(out, ",")
}

func grantsJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func grantsErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
