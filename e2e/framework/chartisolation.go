package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

// ChartIsolation is the chart's isolation admission run for real beside a local cluster: its
// ClusterRoles and Roles, the operator's bindings re-pointed at a user of the test (the
// operator runs as a process, not as the chart's ServiceAccount), the isolation
// ValidatingAdmissionPolicies and bindings, the webhook configuration and Secret pointed at
// loopback, and bin/berth-operator serving the webhook with the chart's --isolation-* arguments.
type ChartIsolation struct {
	// Objs is the rendered chart (chart.Objects).
	Objs []*unstructured.Unstructured
	// ReleaseNamespace is the chart's namespace (its operator ServiceAccount's).
	ReleaseNamespace string
	// Operator is the operator Deployment's name in Objs (default berth-operator).
	Operator string
	// OperatorUser is the user the operator process authenticates as, bound to the chart's
	// operator roles.
	OperatorUser string
	// Set replaces the value of these --isolation-* arguments, or adds them when the chart wrote
	// none (bind address and certificate hosts are always moved to loopback).
	Set map[string]string
}

// StartChartIsolation applies what ci describes and starts the operator, waiting until it is
// ready (its readyz includes the webhook's certificate). Everything it created is removed, and
// the operator stopped, when t ends.
func StartChartIsolation(ctx context.Context, t testing.TB, c *cluster.Cluster, ci ChartIsolation) *cluster.Process {
	t.Helper()
	if ci.Operator == "" {
		ci.Operator = "berth-operator"
	}
	ApplyChartAccess(ctx, t, c.Client, ci)
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	undo, err := InstallChartWebhook(ctx, c.Client, ci.Objs, "https://"+addr+webhook.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undo)
	set := map[string]string{"--isolation-webhook-bind-address": addr, "--isolation-webhook-cert-hosts": "127.0.0.1"}
	for k, v := range ci.Set {
		set[k] = v
	}
	args, err := ChartIsolationArgs(ci.Objs, ci.Operator, set)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		if !hasFlag(args, k) {
			args = append(args, k+"="+v)
		}
	}
	kc, err := c.WriteKubeconfig(ci.OperatorUser, cluster.Identity{User: ci.OperatorUser})
	if err != nil {
		t.Fatal(err)
	}
	op, err := StartOperator(ctx, c, OperatorOptions{Kubeconfig: kc, Args: append([]string{"--metrics-secure=false"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-operator log tail:\n%s", op.Tail(60))
		}
		c.StopComponent(op)
	})
	return op
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// ApplyChartAccess creates what the chart would for the webhook and policies, minus the
// webhook configuration and Secret (InstallChartWebhook points those at loopback): every
// ClusterRole and Role, the operator's bindings re-pointed at ci.OperatorUser, and the isolation
// ValidatingAdmissionPolicies and their bindings. All of it is deleted when t ends.
func ApplyChartAccess(ctx context.Context, t testing.TB, cs kubernetes.Interface, ci ChartIsolation) {
	t.Helper()
	if ci.Operator == "" {
		ci.Operator = "berth-operator"
	}
	bg := context.Background()
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: ci.OperatorUser}}
	isOperator := func(subs []rbacv1.Subject) bool {
		for _, s := range subs {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == ci.Operator && s.Namespace == ci.ReleaseNamespace {
				return true
			}
		}
		return false
	}
	typed := func(o *unstructured.Unstructured, into any) {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	adm := cs.AdmissionregistrationV1()
	isolationPolicy := strings.TrimSuffix(ci.Operator, "-operator") + "-instance-isolation"
	for _, o := range ci.Objs {
		var err error
		name := o.GetName()
		switch o.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			typed(o, &r)
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, &r, metav1.CreateOptions{})
			t.Cleanup(func() { _ = cs.RbacV1().ClusterRoles().Delete(bg, name, metav1.DeleteOptions{}) })
		case "Role":
			var r rbacv1.Role
			typed(o, &r)
			_, err = cs.RbacV1().Roles(r.Namespace).Create(ctx, &r, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			typed(o, &b)
			if !isOperator(b.Subjects) {
				continue
			}
			b.Subjects = user
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{})
			t.Cleanup(func() { _ = cs.RbacV1().ClusterRoleBindings().Delete(bg, name, metav1.DeleteOptions{}) })
		case "RoleBinding":
			var b rbacv1.RoleBinding
			typed(o, &b)
			if !isOperator(b.Subjects) {
				continue
			}
			b.Subjects = user
			_, err = cs.RbacV1().RoleBindings(b.Namespace).Create(ctx, &b, metav1.CreateOptions{})
		case "ValidatingAdmissionPolicy":
			if !strings.HasPrefix(name, isolationPolicy) {
				continue
			}
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			typed(o, &p)
			_, err = adm.ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{})
			t.Cleanup(func() { _ = adm.ValidatingAdmissionPolicies().Delete(bg, name, metav1.DeleteOptions{}) })
		case "ValidatingAdmissionPolicyBinding":
			if !strings.HasPrefix(name, isolationPolicy) {
				continue
			}
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			typed(o, &b)
			_, err = adm.ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{})
			t.Cleanup(func() { _ = adm.ValidatingAdmissionPolicyBindings().Delete(bg, name, metav1.DeleteOptions{}) })
		default:
			continue
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s %s: %v", o.GetKind(), name, err)
		}
	}
}
