package isolation

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

const (
	relNS     = "berth-system"
	tenantNS  = "iso-tenant"
	tenantSA  = "deployer"
	hookName  = "instance-isolation.berth.dev"
	policy    = "berth-instance-isolation"
	dsPool    = "ds" // suiteLabel value of this test's pool nodes
	dsPlain   = "ds-plain"
	classRed  = "red"
	chartVals = "berth"
)

// daemonSet is a tenant's DaemonSet: pods labelled app=name (and class, when given), with the
// tolerations and node selector given.
func daemonSet(ns, name, class string, tols []corev1.Toleration, sel map[string]string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	if class != "" {
		labels[framework.ClassLabel] = class
	}
	spec := framework.PodSpec("", "10m", "16Mi")
	spec.Tolerations, spec.NodeSelector = cluster.TolerateSimulated(tols), sel
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
}

var poolToleration = []corev1.Toleration{{Key: poolLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}

// incident is the DaemonSet of issue 20 item 5: class red, the pool's toleration, nodeSelector
// ipp=true (plus this test's node label, so it targets only this test's pool nodes).
func incident(ns, name string) *appsv1.DaemonSet {
	return daemonSet(ns, name, classRed, poolToleration, map[string]string{poolLabel: "true", suiteLabel: dsPool})
}

// tenantDaemonSets: a tenant ServiceAccount bound only to the built-in edit ClusterRole in its
// namespace creates the incident's DaemonSet and an unclassed one tolerating the pool taint.
// First with only the chart's ValidatingAdmissionPolicies in force (as with the webhook down
// and failurePolicy Ignore), then with the webhook served too: the DaemonSet controller's pod
// creations are refused (its FailedCreate events name the field and the rule), and no pod of
// theirs exists, on a pool node or anywhere. Controls: the same tenant's plain DaemonSet gets
// its pod, and the incident's DaemonSet in an exempt namespace gets a pod on each pool node.
func (e *env) tenantDaemonSets(ctx context.Context, t *testing.T) {
	c := e.c
	var v map[string]any
	// why extraPoolBinders: the suite's berth-scheduler runs as user berth-scheduler, not the
	// chart's ServiceAccount; anyone else's binding to a pool node is refused.
	if err := yamlUnmarshal(`
scheduler: {plugins: {instanceIsolation: {enabled: true}}}
isolation: {enabled: true, mode: berth, extraPoolBinders: [berth-scheduler]}`, &v); err != nil {
		t.Fatal(err)
	}
	r, err := chart.Render(chartVals, relNS, v)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := chart.Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{relNS, tenantNS} {
		if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
			t.Fatal(err)
		}
	}
	nodes := []cluster.NodeSpec{poolNode("ds-pool-1", dsPool), poolNode("ds-pool-2", dsPool),
		{Name: "ds-plain-1", CPU: "8", Memory: "32Gi", Pods: podsPerNode, Labels: map[string]string{suiteLabel: dsPlain}}}
	if err := c.AddNodes(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = c.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
		}
	})
	tenant := tenantClient(ctx, t, c)

	// Phase 1: the policies alone.
	for _, o := range objs {
		createAdmission(ctx, t, c, o)
	}
	// why: a new binding takes effect a moment after it is created; the tenant's first
	// DaemonSet must meet it.
	probe := framework.Pod(tenantNS, "probe", nil, framework.PodSpec("", "", ""))
	probe.Spec.Tolerations = cluster.TolerateSimulated(poolToleration)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := tenant.CoreV1().Pods(tenantNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"), nil
	}); err != nil {
		t.Fatalf("the pool-access policy never refused a tolerating pod: %v", err)
	}

	// Controls first: the tenant may create DaemonSets whose pods are created, and an exempt
	// namespace runs the incident's DaemonSet on every pool node.
	create := func(t *testing.T, cs kubernetes.Interface, ds *appsv1.DaemonSet) {
		t.Helper()
		if _, err := cs.AppsV1().DaemonSets(ds.Namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating DaemonSet %s/%s: %v", ds.Namespace, ds.Name, err)
		}
		t.Cleanup(func() {
			_ = c.Client.AppsV1().DaemonSets(ds.Namespace).Delete(context.Background(), ds.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
		})
	}
	create(t, tenant, daemonSet(tenantNS, "plain", "", nil, map[string]string{suiteLabel: dsPlain}))
	create(t, c.Client, incident(metav1.NamespaceSystem, "node-agent"))
	if on := e.waitDaemonPods(ctx, t, tenantNS, "plain", 1); on[0] != "ds-plain-1" {
		t.Fatalf("the tenant's plain DaemonSet pod is on %v, want ds-plain-1", on)
	}
	if on := e.waitDaemonPods(ctx, t, metav1.NamespaceSystem, "node-agent", 2); on[0] != "ds-pool-1" || on[1] != "ds-pool-2" {
		t.Fatalf("the exempt DaemonSet's pods are on %v, want ds-pool-1 and ds-pool-2", on)
	}

	for _, tc := range []struct {
		phase string
		ds    *appsv1.DaemonSet
		// by names who refuses; msg is the refusal after "instance isolation: ".
		by, msg string
	}{
		{"policy", incident(tenantNS, "red"), "ValidatingAdmissionPolicy '" + policy + "'",
			"metadata.ownerReferences[0]: pod of instance class red is owned by DaemonSet red; only pods in an exempt namespace (berth-system, kube-system) may be DaemonSet pods of an instance class"},
		{"policy", daemonSet(tenantNS, "blank", "", poolToleration, map[string]string{suiteLabel: dsPool}), "ValidatingAdmissionPolicy '" + policy + "-pool-access'",
			"spec.tolerations[0]: tolerates the isolation pool taint ipp=true:NoSchedule; only pods of an instance class (label ipp-class or berth.dev/instance-class) or in an exempt namespace (berth-system, kube-system) may tolerate the pool taint"},
		{"webhook", incident(tenantNS, "red-2"), `admission webhook "` + hookName + `" denied the request`,
			"metadata.ownerReferences[0]: pod of instance class red is owned by DaemonSet red-2; only pods in an exempt namespace (berth-system, kube-system)"},
		{"webhook", daemonSet(tenantNS, "blank-2", "", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, map[string]string{suiteLabel: dsPool}),
			`admission webhook "` + hookName + `" denied the request`, "spec.tolerations[0]: tolerates the isolation pool taint ipp=true:NoSchedule; only pods of an instance class"},
	} {
		if tc.phase == "webhook" && e.stopWebhook == nil {
			// Phase 2: the webhook in front of the policies.
			e.startWebhook(ctx, t, objs)
		}
		t.Run(tc.phase+" refuses "+tc.ds.Name, func(t *testing.T) {
			create(t, tenant, tc.ds)
			ev := e.waitFailedCreate(ctx, t, tc.ds)
			if !strings.Contains(ev, tc.by) || !strings.Contains(ev, "instance isolation: "+tc.msg) {
				t.Fatalf("FailedCreate of DaemonSet %s: %q\nwant it refused by %s with %q", tc.ds.Name, ev, tc.by, tc.msg)
			}
			t.Logf("DaemonSet %s: %s", tc.ds.Name, ev)
			// why: the controller does want a pod on both pool nodes (so the refusals, not its
			// node selection, are why none exists).
			var ds *appsv1.DaemonSet
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				var err error
				ds, err = c.Client.AppsV1().DaemonSets(tenantNS).Get(ctx, tc.ds.Name, metav1.GetOptions{})
				return err == nil && ds.Status.ObservedGeneration == ds.Generation && ds.Status.DesiredNumberScheduled == 2, nil
			})
			if err != nil {
				t.Fatalf("DaemonSet %s never wanted a pod on both pool nodes: %+v", tc.ds.Name, ds.Status)
			}
			if ds.Status.CurrentNumberScheduled != 0 {
				t.Errorf("DaemonSet %s: %d pods scheduled, want none", ds.Name, ds.Status.CurrentNumberScheduled)
			}
			pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app=" + tc.ds.Name})
			if err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) > 0 {
				t.Errorf("DaemonSet %s has %d pods, first on %q", ds.Name, len(pods.Items), pods.Items[0].Spec.NodeName)
			}
		})
	}
	// What the pool nodes hold in the end: the exempt daemon only.
	for _, n := range []string{"ds-pool-1", "ds-pool-2"} {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Namespace != metav1.NamespaceSystem {
				t.Errorf("pool node %s holds %s/%s", n, p.Namespace, p.Name)
			}
		}
	}
}

// tenantClient is a client authenticated with a token of ServiceAccount iso-tenant/deployer,
// bound to nothing but the built-in edit ClusterRole in its namespace.
func tenantClient(ctx context.Context, t *testing.T, c *cluster.Cluster) kubernetes.Interface {
	t.Helper()
	sa, err := c.Client.CoreV1().ServiceAccounts(tenantNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: tenantSA}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tenantSA + "-edit", Namespace: tenantNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: tenantSA, Namespace: tenantNS}}}
	if _, err := c.Client.RbacV1().RoleBindings(tenantNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = c.Client.RbacV1().RoleBindings(tenantNS).Delete(bg, rb.Name, metav1.DeleteOptions{})
		_ = c.Client.CoreV1().ServiceAccounts(tenantNS).Delete(bg, sa.Name, metav1.DeleteOptions{})
	})
	tok, err := c.Client.CoreV1().ServiceAccounts(tenantNS).CreateToken(ctx, tenantSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(c.RESTConfig)
	cfg.BearerToken = tok.Status.Token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The token is the ServiceAccount's, and edit is all it has: DaemonSets in its namespace,
	// nothing in kube-system.
	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + tenantNS + ":" + tenantSA; who.Status.UserInfo.Username != want {
		t.Fatalf("the tenant client is %q, want %q", who.Status.UserInfo.Username, want)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.AppsV1().DaemonSets(tenantNS).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the edit binding did not let the tenant list DaemonSets: %v", err)
	}
	if _, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Create(ctx, incident(metav1.NamespaceSystem, "tenant-probe"),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant may create DaemonSets in kube-system (%v): it must hold edit in its namespace only", err)
	}
	return cs
}

// createAdmission creates the chart's admission policy or binding o, removed when the test
// ends (the webhook's objects come from framework.InstallChartWebhook).
func createAdmission(ctx context.Context, t *testing.T, c *cluster.Cluster, o *unstructured.Unstructured) {
	t.Helper()
	adm := c.Client.AdmissionregistrationV1()
	bg := context.Background()
	var err error
	switch o.GetKind() {
	case "ValidatingAdmissionPolicy":
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		toTyped(t, o, &p)
		_, err = adm.ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{})
		t.Cleanup(func() { _ = adm.ValidatingAdmissionPolicies().Delete(bg, p.Name, metav1.DeleteOptions{}) })
	case "ValidatingAdmissionPolicyBinding":
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		toTyped(t, o, &b)
		_, err = adm.ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{})
		t.Cleanup(func() { _ = adm.ValidatingAdmissionPolicyBindings().Delete(bg, b.Name, metav1.DeleteOptions{}) })
	default:
		return
	}
	if err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// startWebhook serves the webhook in this process (the operator's code, configured by the
// chart's --isolation-* operator arguments with the address and certificate hosts moved to
// loopback) behind the chart's MutatingWebhookConfiguration and Secret, and waits until the
// API server calls it.
func (e *env) startWebhook(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	args, err := framework.ChartIsolationArgs(objs, chartVals+"-operator", nil)
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("operator", flag.ContinueOnError)
	f := webhook.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the operator would not start with the chart's %v: %v", args, err)
	}
	o, err := f.Options()
	if err != nil {
		t.Fatalf("the operator would not start with the chart's %v: %v", args, err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	o.BindAddress, o.Certs.Hosts = fmt.Sprintf("127.0.0.1:%d", port), []string{"127.0.0.1"}
	undo, err := framework.InstallChartWebhook(ctx, e.c.Client, objs, "https://"+o.BindAddress+webhook.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undo)
	s, err := webhook.New(o, e.c.Client, logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(sctx); close(done) }()
	e.stopWebhook = func() { cancel(); <-done }
	t.Cleanup(e.stopWebhook)
	// Ready, and the API server trusts the injected bundle: a classed dry-run pod comes back
	// mutated.
	probe := framework.Pod(tenantNS, "probe", map[string]string{framework.ClassLabel: "probe"}, framework.PodSpec("", "", ""))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if s.Ready(nil) != nil {
			return false, nil
		}
		got, err := e.c.Client.CoreV1().Pods(tenantNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Spec.SchedulerName == mainProfile, nil
	})
	if err != nil {
		t.Fatalf("the webhook did not start answering: %v (readiness: %v)", err, s.Ready(nil))
	}
}

// waitDaemonPods waits for count bound pods of DaemonSet name and returns their nodes, sorted.
func (e *env) waitDaemonPods(ctx context.Context, t *testing.T, ns, name string, count int) []string {
	t.Helper()
	pods, err := framework.WaitPods(ctx, e.c.Client, ns, "app="+name, count, time.Minute, framework.Bound)
	if err != nil {
		t.Fatalf("DaemonSet %s/%s: %v", ns, name, err)
	}
	var on []string
	for _, p := range pods {
		on = append(on, p.Spec.NodeName)
	}
	sort.Strings(on)
	return on
}

// waitFailedCreate returns the message of the DaemonSet controller's first FailedCreate event
// for ds.
func (e *env) waitFailedCreate(ctx context.Context, t *testing.T, ds *appsv1.DaemonSet) string {
	t.Helper()
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := e.c.Client.CoreV1().Events(ds.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "DaemonSet", "involvedObject.name": ds.Name, "reason": "FailedCreate"}.String()})
		if err != nil || len(evs.Items) == 0 {
			return false, nil
		}
		msg = evs.Items[0].Message
		return true, nil
	})
	if err != nil {
		t.Fatalf("no FailedCreate event for DaemonSet %s/%s: %v", ds.Namespace, ds.Name, err)
	}
	return msg
}

func toTyped(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func yamlUnmarshal(s string, v any) error { return yaml.Unmarshal([]byte(s), v) }
