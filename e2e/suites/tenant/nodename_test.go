package tenant

// TestTenantNodeNameDoor (issue 35 item 2, "no nodeName door"): on the real API server, with
// the chart's webhook configuration and policies and the real berth-operator serving the
// webhook under the chart's own RBAC, a tenant ServiceAccount bound only to the built-in edit
// role names a pool node in spec.nodeName, with and without a class, and is refused with the
// field, the node, the reason and what would allow it. The built-in edit role cannot create
// bindings at all (shown here); an identity that was granted pods/binding (a tenant's own
// controller, say) binding a pod to a pool node, through pods/binding and the legacy bindings
// resource, is refused too. Controls: nodeName on a node outside the pool is admitted, and the
// class's scheduler (berth-scheduler) binds a classed pod to the pool node. KWOK nodes: needs
// no root.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

const (
	nnRelNS  = "berth-system"
	nnTenant = "nn-red"
	nnOpUser = "berth-operator-nodename"
	nnHook   = "instance-isolation.berth.dev"
	nnBind   = "instance-isolation-binding.berth.dev"
)

// The suite's berth-scheduler runs as user berth-scheduler, not the chart's ServiceAccount, so
// it is named a pool binder: the class's scheduler, whose bindings to the pool must pass.
const nnValues = `
scheduler: {plugins: {instanceIsolation: {enabled: true}}}
isolation: {enabled: true, mode: berth, failurePolicy: Fail, extraPoolBinders: [berth-scheduler]}
`

func TestTenantNodeNameDoor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Pods here are placed by berth-scheduler, by nodeName or by a binding; no stock scheduler.
	c := framework.StartCluster(ctx, t, cluster.Config{Logf: t.Logf, WithoutDefaultScheduler: true})
	cs := c.Client
	for _, ns := range []string{nnRelNS, nnTenant} {
		if err := framework.EnsureNamespace(ctx, cs, ns); err != nil {
			t.Fatal(err)
		}
	}
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

	pool := cluster.NodeSpec{Name: "nn-pool-1", CPU: "8", Memory: "16Gi", Labels: map[string]string{"ipp": "true"},
		Taints: []corev1.Taint{{Key: "ipp", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	plain := cluster.NodeSpec{Name: "nn-plain-1", CPU: "8", Memory: "16Gi"}
	if err := c.AddNodes(ctx, pool, plain); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{pool.Name, plain.Name} {
			_ = cs.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	nnStartIsolation(ctx, t, c, cs, objs, "berth-operator-nodename")

	mallory := nnClient(ctx, t, cs, c.RESTConfig, "mallory", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"})
	onNode := func(name, node string, labels map[string]string) *corev1.Pod {
		p := framework.Pod(nnTenant, name, labels, framework.PodSpec("", "10m", "16Mi"))
		p.Spec.NodeName = node
		return p
	}
	// why: the API server trusts the operator's injected CA a moment after it is written, and
	// the policies' bindings take effect a moment after they are created; wait for the webhook
	// to answer (a dry run leaves nothing).
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := mallory.CoreV1().Pods(nnTenant).Create(ctx, onNode("probe", pool.Name, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), `admission webhook "`+nnHook+`" denied the request`), nil
	}); err != nil {
		t.Fatalf("the webhook never refused a pod naming the pool node: %v", err)
	}

	const rule = "; pool nodes belong to instance classes and are reached only through the scheduler of the pod's class, never by naming the node; " +
		"only pods in an exempt namespace (berth-system, kube-system) may name a pool node"
	t.Run("nodeName on a pool node, with and without a class, is refused naming the field, node, reason and way", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			pod  *corev1.Pod
			want string // the message after "instance isolation: "; "" admitted
		}{
			{"unclassed", onNode("unclassed", pool.Name, map[string]string{"app": "squat"}),
				"spec.nodeName: names node nn-pool-1, an isolation pool node (label ipp=true)" + rule},
			{"another tenant's class", onNode("classed", pool.Name, map[string]string{"ipp-class": "blue"}),
				`pod of instance class blue sets spec.nodeName "nn-pool-1", which bypasses the scheduler and with it isolation; to pin it, require the node with node affinity on kubernetes.io/hostname instead`},
			{"control: unclassed on a node outside the pool", onNode("outside", plain.Name, nil), ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := mallory.CoreV1().Pods(nnTenant).Create(ctx, tc.pod, metav1.CreateOptions{})
				if tc.want == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					t.Cleanup(func() {
						_ = cs.CoreV1().Pods(nnTenant).Delete(context.Background(), tc.pod.Name, *metav1.NewDeleteOptions(0))
					})
					return
				}
				want := `admission webhook "` + nnHook + `" denied the request: instance isolation: ` + tc.want
				if err == nil || !strings.HasSuffix(err.Error(), want) {
					t.Fatalf("create: %v\nwant a refusal ending with %q", err, want)
				}
				t.Logf("refused: %v", err)
			})
		}
	})

	// A pod no scheduler places: the target of the bindings below.
	stray := framework.Pod(nnTenant, "stray", nil, framework.PodSpec("nobody", "10m", "16Mi"))
	if _, err := mallory.CoreV1().Pods(nnTenant).Create(ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := func(node string) *corev1.Binding {
		return &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: nnTenant, Name: stray.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	}

	t.Run("the built-in edit role cannot create bindings at all", func(t *testing.T) {
		for _, res := range []struct{ resource, sub string }{{"pods", "binding"}, {"bindings", ""}} {
			sar, err := mallory.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: nnTenant, Verb: "create", Resource: res.resource, Subresource: res.sub}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed {
				t.Errorf("edit may create %s/%s", res.resource, res.sub)
			}
		}
		err := mallory.CoreV1().Pods(nnTenant).Bind(ctx, binding(pool.Name), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot create resource "pods/binding"`) {
			t.Fatalf("bind as edit: %v, want RBAC's refusal", err)
		}
		t.Logf("edit: %v", err)
	})

	// An identity that holds create on pods/binding and bindings in the tenant's namespace
	// (what a tenant's own scheduler or controller could be granted).
	if _, err := cs.RbacV1().Roles(nnTenant).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "binder"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/binding", "bindings"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binder := nnClient(ctx, t, cs, c.RESTConfig, "binder", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "binder"})
	binderUser := "system:serviceaccount:" + nnTenant + ":binder"

	t.Run("a binding to a pool node by anyone but the class's scheduler is refused, both ways", func(t *testing.T) {
		want := `admission webhook "` + nnBind + `" denied the request: instance isolation: target.name: binding pod nn-red/stray to node nn-pool-1, ` +
			"an isolation pool node (label ipp=true); pool nodes are reached only through the scheduler of the pod's class " +
			"(system:serviceaccount:berth-system:berth-scheduler, berth-scheduler), not " + binderUser +
			"; only pods in an exempt namespace (berth-system, kube-system) may be bound there by anyone else"
		err := binder.CoreV1().Pods(nnTenant).Bind(ctx, binding(pool.Name), metav1.CreateOptions{})
		if err == nil || !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), want) {
			t.Fatalf("pods/binding: %v\nwant a refusal ending with %q", err, want)
		}
		t.Logf("pods/binding: %v", err)
		// The legacy namespaced bindings resource: the same storage by another path.
		body, _ := runtime.Encode(unstructured.UnstructuredJSONScheme, nnUnstructured(t, binding(pool.Name)))
		res := binder.CoreV1().RESTClient().Post().Namespace(nnTenant).Resource("bindings").Body(body).Do(ctx)
		if err := res.Error(); err == nil || !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), want) {
			t.Fatalf("bindings: %v\nwant a refusal ending with %q", err, want)
		}
		got, err := cs.CoreV1().Pods(nnTenant).Get(ctx, stray.Name, metav1.GetOptions{})
		if err != nil || got.Spec.NodeName != "" {
			t.Fatalf("the stray pod is on %q (%v)", got.Spec.NodeName, err)
		}
	})

	t.Run("controls: a binding outside the pool passes; the class's scheduler binds to the pool", func(t *testing.T) {
		if err := binder.CoreV1().Pods(nnTenant).Bind(ctx, binding(plain.Name), metav1.CreateOptions{}); err != nil {
			t.Fatalf("binding to %s: %v", plain.Name, err)
		}
		p := framework.Pod(nnTenant, "blue-1", map[string]string{"ipp-class": "blue"}, framework.PodSpec("", "10m", "16Mi"))
		if _, err := mallory.CoreV1().Pods(nnTenant).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("classed pod: %v", err)
		}
		pods, err := framework.WaitPods(ctx, cs, nnTenant, "ipp-class=blue", 1, time.Minute, framework.Bound)
		if err != nil {
			t.Fatal(err)
		}
		if pods[0].Spec.NodeName != pool.Name {
			t.Fatalf("class blue's pod is on %s, want %s", pods[0].Spec.NodeName, pool.Name)
		}
	})
}

// nnApplyChart creates the chart's roles, the operator's bindings (to nnOpUser) and the
// isolation policies, as framework.ApplyChartAccess does for every suite.
func nnApplyChart(ctx context.Context, t *testing.T, cs kubernetes.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	framework.ApplyChartAccess(ctx, t, cs, framework.ChartIsolation{Objs: objs, ReleaseNamespace: nnRelNS, OperatorUser: nnOpUser})
}

// nnClient is a ServiceAccount name in the tenant namespace bound to role there, as a client.
func nnClient(ctx context.Context, t *testing.T, cs kubernetes.Interface, admin *rest.Config, name string, role rbacv1.RoleRef) kubernetes.Interface {
	t.Helper()
	return clTenant(ctx, t, cs, admin, nnTenant, name, role)
}

func nnTyped(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func nnUnstructured(t *testing.T, b *corev1.Binding) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("Binding")
	return u
}

// nnStartIsolation runs what a tenant meets in front of the pool: berth-scheduler with
// InstanceIsolation, and the operator serving the chart's webhook (its arguments, its
// configuration) as the chart's operator identity, named name. Both stop with the test.
func nnStartIsolation(ctx context.Context, t *testing.T, c *cluster.Cluster, cs kubernetes.Interface, objs []*unstructured.Unstructured, name string) {
	t.Helper()
	profiles, err := framework.InstanceIsolationProfiles("berth-scheduler", "", 10, configv1.InstanceIsolationArgs{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Config: framework.SchedulerConfig(profiles)}); err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	undo, err := framework.InstallChartWebhook(ctx, cs, objs, "https://"+addr+webhook.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undo)
	args, err := framework.ChartIsolationArgs(objs, "berth-operator", map[string]string{
		"--isolation-webhook-bind-address": addr, "--isolation-webhook-cert-hosts": "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := c.WriteKubeconfig(name, cluster.Identity{User: nnOpUser})
	if err != nil {
		t.Fatal(err)
	}
	// readyz includes the webhook's certificate and its Node cache.
	op, err := framework.StartOperator(ctx, c, framework.OperatorOptions{Kubeconfig: kc, Args: append([]string{"--metrics-secure=false"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-operator log tail:\n%s", op.Tail(60))
		}
	})
}
