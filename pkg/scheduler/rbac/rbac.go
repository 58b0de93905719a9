// Package rbac renders the RBAC a second scheduler needs. The same objects back the local
// cluster, the operator and the chart, so what the tests grant is what users get.
package rbac

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Objects is the RBAC for one scheduler identity.
type Objects struct {
	ClusterRoles        []*rbacv1.ClusterRole
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
	Roles               []*rbacv1.Role
	RoleBindings        []*rbacv1.RoleBinding
}

// UserSubject is a user identity (client certificate).
func UserSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// ServiceAccountSubject is a service account identity (in-cluster deployment).
func ServiceAccountSubject(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

// SchedulerRBAC grants subject what a scheduler named name needs: the built-in scheduler roles
// (which only cover the kube-scheduler Lease), its own Lease in leaseNamespace, delegated
// authentication and authorization for /metrics, and the authentication ConfigMap reader.
func SchedulerRBAC(subject rbacv1.Subject, name, leaseNamespace string) Objects {
	return SchedulerRBACNamed(subject, name, name, leaseNamespace)
}

// SchedulerRBACNamed is SchedulerRBAC with the objects' name prefix apart from the Lease name:
// the operator prefixes objects with the owning resource's namespace and name (two
// SecondarySchedulers in different namespaces may share a schedulerName and Lease name).
func SchedulerRBACNamed(subject rbacv1.Subject, name, leaseName, leaseNamespace string) Objects {
	binding := func(suffix, role string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{subject},
		}
	}
	return Objects{
		ClusterRoles: []*rbacv1.ClusterRole{{
			// What Berth's plugins read beyond the built-in roles: SySched's seccomp profiles,
			// bindings and per-node install states (Security Profiles Operator's API, or
			// Berth's copy of its CRDs).
			ObjectMeta: metav1.ObjectMeta{Name: name + "-plugins"},
			Rules: []rbacv1.PolicyRule{{
				// The load-aware plugins read the load watcher, which checks this virtual
				// resource with a SubjectAccessReview (pods: the pod lists and per-pod usage).
				APIGroups: []string{"berth.dev"},
				Resources: []string{"nodeloads", "nodeloads/pods"},
				Verbs:     []string{"get"},
			}, {
				APIGroups: []string{"security-profiles-operator.x-k8s.io"},
				Resources: []string{"seccompprofiles", "profilebindings", "securityprofilenodestatuses"},
				Verbs:     []string{"get", "list", "watch"},
			}, {
				// NodeImageLocality: the agents' image inventories; InstanceIsolation: which
				// namespaces share a class (both read only).
				APIGroups: []string{"berth.dev"},
				Resources: []string{"nodeimages", "instanceclasses"},
				Verbs:     []string{"get", "list", "watch"},
			}},
		}},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{
			binding("plugins", name+"-plugins"),
			binding("as-kube-scheduler", "system:kube-scheduler"),
			binding("as-volume-scheduler", "system:volume-scheduler"),
			binding("auth-delegator", "system:auth-delegator"),
		},
		Roles: []*rbacv1.Role{{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-leader-election", Namespace: leaseNamespace},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{leaseName},
					Verbs: []string{"get", "update", "patch"}},
			},
		}},
		RoleBindings: []*rbacv1.RoleBinding{
			{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-leader-election", Namespace: leaseNamespace},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name + "-leader-election"},
				Subjects:   []rbacv1.Subject{subject},
			},
			{
				// The delegated authenticator reads the client CA from this ConfigMap.
				ObjectMeta: metav1.ObjectMeta{Name: name + "-authentication-reader", Namespace: "kube-system"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
				Subjects:   []rbacv1.Subject{subject},
			},
		},
	}
}

// Apply creates the objects, or updates them where they exist.
func Apply(ctx context.Context, c kubernetes.Interface, o Objects) error {
	for _, r := range o.ClusterRoles {
		api := c.RbacV1().ClusterRoles()
		if _, err := api.Create(ctx, r, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			if _, err = api.Update(ctx, r, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("ClusterRole %s: %w", r.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("ClusterRole %s: %w", r.Name, err)
		}
	}
	for _, b := range o.ClusterRoleBindings {
		api := c.RbacV1().ClusterRoleBindings()
		if _, err := api.Create(ctx, b, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			if _, err = api.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("ClusterRoleBinding %s: %w", b.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	for _, r := range o.Roles {
		api := c.RbacV1().Roles(r.Namespace)
		if _, err := api.Create(ctx, r, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			if _, err = api.Update(ctx, r, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("Role %s/%s: %w", r.Namespace, r.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("Role %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	for _, b := range o.RoleBindings {
		api := c.RbacV1().RoleBindings(b.Namespace)
		if _, err := api.Create(ctx, b, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			if _, err = api.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("RoleBinding %s/%s: %w", b.Namespace, b.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("RoleBinding %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	return nil
}

// Each calls f for every object, in the order Apply creates them (cluster roles first, so a
// binding never names a role that is not there yet).
func (o Objects) Each(f func(obj metav1.Object)) {
	for _, r := range o.ClusterRoles {
		f(r)
	}
	for _, b := range o.ClusterRoleBindings {
		f(b)
	}
	for _, r := range o.Roles {
		f(r)
	}
	for _, b := range o.RoleBindings {
		f(b)
	}
}
