package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// Cleanup must leave no SecondaryScheduler in the namespace and none of their cluster-scoped
// RBAC, without an operator running, and must not touch other namespaces.
func TestCleanup(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	mine := testCR()
	mine.Finalizers = []string{Finalizer}
	other := testCR()
	other.Namespace, other.UID = "elsewhere", "uid-2"
	other.Finalizers = []string{Finalizer}
	var objs []client.Object
	objs = append(objs, mine, other)
	for _, ss := range []*berthv1alpha1.SecondaryScheduler{mine, other} {
		RBAC(ss).Each(func(o metav1.Object) {
			if o.GetNamespace() != ss.Namespace { // what the finalizer must remove
				objs = append(objs, o.(client.Object))
			}
		})
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Cleanup(ctx, c, mine.Namespace); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(mine), &berthv1alpha1.SecondaryScheduler{}); !apierrors.IsNotFound(err) {
		t.Errorf("SecondaryScheduler %s/%s still there: %v", mine.Namespace, mine.Name, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), &berthv1alpha1.SecondaryScheduler{}); err != nil {
		t.Errorf("SecondaryScheduler in another namespace: %v", err)
	}
	for _, tc := range []struct {
		ss   *berthv1alpha1.SecondaryScheduler
		want int
	}{{mine, 0}, {other, 4}} {
		var crbs rbacv1.ClusterRoleBindingList
		if err := c.List(ctx, &crbs, client.MatchingLabels(OwnerLabels(tc.ss))); err != nil {
			t.Fatal(err)
		}
		if len(crbs.Items) != tc.want {
			t.Errorf("%s/%s: %d ClusterRoleBindings left, want %d", tc.ss.Namespace, tc.ss.Name, len(crbs.Items), tc.want)
		}
	}
	var crs rbacv1.ClusterRoleList
	if err := c.List(ctx, &crs, client.MatchingLabels(OwnerLabels(mine))); err != nil || len(crs.Items) != 0 {
		t.Errorf("ClusterRoles left: %d %v", len(crs.Items), err)
	}
	var rbs rbacv1.RoleBindingList
	if err := c.List(ctx, &rbs, client.InNamespace("kube-system"), client.MatchingLabels(OwnerLabels(mine))); err != nil || len(rbs.Items) != 0 {
		t.Errorf("kube-system RoleBindings left: %d %v", len(rbs.Items), err)
	}
}

func TestCleanupTimesOut(t *testing.T) {
	// A resource nobody can finish (a foreign finalizer) ends in an error naming the namespace.
	scheme, _ := Scheme()
	ss := testCR()
	ss.Finalizers = []string{"example.com/hold"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ss).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err := Cleanup(ctx, c, ss.Namespace)
	if err == nil || !strings.Contains(err.Error(), "left in berth-system") {
		t.Fatalf("want a timeout naming the namespace, got %v", err)
	}
}
