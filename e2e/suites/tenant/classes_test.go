package tenant

// TestTenantClassesOwnedByNamespaces (issue 35 item 1, "classes owned by namespaces"): on the
// real API server, with the chart's webhook configuration and policies, the real berth-operator
// serving the webhook under the chart's RBAC and the real berth-scheduler, tenants whose
// ServiceAccounts hold only the built-in edit role in their namespace:
//   - red uses blue's class value (the incident): admitted as red's own class, placed on another
//     node than blue's pods; once an administrator's InstanceClass grants the value to blue
//     alone, red's next pod carrying it is refused, naming the InstanceClass and the grant;
//   - gold, shared by an InstanceClass with red and blue: both admitted and placed together;
//     green is refused with the field, the InstanceClass and the grant to ask for;
//   - no tenant may write an InstanceClass (the edit role does not reach it).
// KWOK nodes: needs no root.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

const (
	clRed, clBlue, clGreen = "cl-red", "cl-blue", "cl-green"
)

func TestTenantClassesOwnedByNamespaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{Logf: t.Logf, WithoutDefaultScheduler: true})
	cs := c.Client
	for _, ns := range []string{nnRelNS, clRed, clBlue, clGreen} {
		if err := framework.EnsureNamespace(ctx, cs, ns); err != nil {
			t.Fatal(err)
		}
	}
	// The administrator's grant, before the scheduler and the operator start (both wait for
	// their InstanceClass informers).
	framework.CreateInstanceClass(ctx, t, c.RESTConfig, "gold", clRed, clBlue)

	var v map[string]any
	if err := yaml.Unmarshal([]byte(nnValues), &v); err != nil {
		t.Fatal(err)
	}
	r, err := chart.Render("berth", nnRelNS, v)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	nnApplyChart(ctx, t, cs, objs)

	var pool []string
	for i := 1; i <= 3; i++ {
		n := cluster.NodeSpec{Name: fmt.Sprintf("cl-pool-%d", i), CPU: "8", Memory: "16Gi", Labels: map[string]string{"ipp": "true"},
			Taints: []corev1.Taint{{Key: "ipp", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
		if err := c.AddNodes(ctx, n); err != nil {
			t.Fatal(err)
		}
		pool = append(pool, n.Name)
	}
	t.Cleanup(func() {
		for _, n := range pool {
			_ = cs.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	nnStartIsolation(ctx, t, c, cs, objs, "berth-operator-classes")

	edit := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}
	tenants := map[string]kubernetes.Interface{}
	for _, ns := range []string{clRed, clBlue, clGreen} {
		tenants[ns] = clTenant(ctx, t, cs, c.RESTConfig, ns, "tenant", edit)
	}
	classed := func(ns, name, class string) *corev1.Pod {
		return framework.Pod(ns, name, map[string]string{"ipp-class": class}, framework.PodSpec("", "10m", "16Mi"))
	}
	create := func(t *testing.T, p *corev1.Pod) error {
		_, err := tenants[p.Namespace].CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() {
				_ = cs.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, *metav1.NewDeleteOptions(0))
			})
		}
		return err
	}
	nodeOf := func(t *testing.T, p *corev1.Pod) string {
		t.Helper()
		var node string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			node = got.Spec.NodeName
			return node != "", nil
		}); err != nil {
			t.Fatalf("%s/%s never bound: %v", p.Namespace, p.Name, err)
		}
		return node
	}
	grantRefusal := func(ns, class string, granted ...string) string {
		return `admission webhook "` + nnHook + `" denied the request: instance isolation: ` + webhook.GrantRefusal("ipp-class", class, ns, granted)
	}
	// why: the API server trusts the operator's injected CA a moment after it is written, and
	// the operator's InstanceClass cache fills at start; a dry run leaves nothing.
	want := grantRefusal(clGreen, "gold", clRed, clBlue)
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := tenants[clGreen].CoreV1().Pods(clGreen).Create(ctx, classed(clGreen, "probe", "gold"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.HasSuffix(err.Error(), want), nil
	}); err != nil {
		t.Fatalf("the webhook never refused green's gold pod with %q", want)
	}

	t.Run("another namespace's class value is another class: different nodes, then refused once granted to its owner", func(t *testing.T) {
		victim := classed(clBlue, "blue-1", "blue")
		if err := create(t, victim); err != nil {
			t.Fatalf("blue's own class: %v", err)
		}
		victimNode := nodeOf(t, victim)
		attacker := classed(clRed, "blue-1", "blue")
		if err := create(t, attacker); err != nil {
			t.Fatalf("red's pod labelled blue (red's own class until an InstanceClass says otherwise): %v", err)
		}
		if n := nodeOf(t, attacker); n == victimNode {
			t.Fatalf("red's class-blue pod is on %s beside blue's class-blue pod", n)
		} else {
			t.Logf("blue/blue on %s, red/blue on %s", victimNode, n)
		}
		// The administrator makes blue's class blue's alone: red's next pod carrying it is
		// refused, naming the InstanceClass and the grant.
		framework.CreateInstanceClass(ctx, t, c.RESTConfig, "blue", clBlue)
		want := grantRefusal(clRed, "blue", clBlue)
		var err error
		_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err = tenants[clRed].CoreV1().Pods(clRed).Create(ctx, classed(clRed, "blue-2", "blue"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err != nil, nil
		})
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Fatalf("red's class-blue pod after InstanceClass blue: %v\nwant a refusal ending with %q", err, want)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("a shared class: the granted namespaces are admitted and share a node, a third is refused naming the grant", func(t *testing.T) {
		red := classed(clRed, "gold-1", "gold")
		if err := create(t, red); err != nil {
			t.Fatalf("red, granted gold: %v", err)
		}
		redNode := nodeOf(t, red)
		blue := classed(clBlue, "gold-1", "gold")
		if err := create(t, blue); err != nil {
			t.Fatalf("blue, granted gold: %v", err)
		}
		// why: InstanceIsolation packs a class onto the nodes it holds, and gold's are one class.
		if n := nodeOf(t, blue); n != redNode {
			t.Fatalf("blue's gold pod on %s, red's on %s: one shared class should share its node", n, redNode)
		}
		err := create(t, classed(clGreen, "gold-1", "gold"))
		if want := grantRefusal(clGreen, "gold", clRed, clBlue); err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Fatalf("green's gold pod: %v\nwant a refusal ending with %q", err, want)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("no tenant may write an InstanceClass", func(t *testing.T) {
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			sar, err := tenants[clGreen].AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: "berth.dev", Resource: "instanceclasses", Name: "gold"}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed {
				t.Errorf("a tenant with edit may %s InstanceClasses", verb)
			}
		}
	})
}

// clTenant is ServiceAccount name in namespace ns bound to role there, as a client
// (impersonated, with the groups a ServiceAccount token carries).
func clTenant(ctx context.Context, t *testing.T, cs kubernetes.Interface, admin *rest.Config, ns, name string, role rbacv1.RoleRef) kubernetes.Interface {
	t.Helper()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: role, Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	cl, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
