package bench

import (
	"context"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/pkg/scheduler/rbac"
)

// grantPluginReads gives the bench schedulers (they run as system:kube-scheduler) only the
// plugin reads the chart grants berth-scheduler, under ClusterRole name: a plugin whose
// informer is refused (InstanceIsolation's InstanceClasses, NodeImageLocality's inventories)
// would otherwise be measured in a state no installed scheduler is in.
func grantPluginReads(ctx context.Context, c *cluster.Cluster, name string) error {
	objs := rbac.SchedulerRBAC(rbac.UserSubject(cluster.SchedulerIdentity.User), name, "kube-system")
	only := rbac.Objects{ClusterRoles: objs.ClusterRoles}
	for _, b := range objs.ClusterRoleBindings {
		if b.RoleRef.Name == objs.ClusterRoles[0].Name {
			only.ClusterRoleBindings = append(only.ClusterRoleBindings, b)
		}
	}
	return rbac.Apply(ctx, c.Client, only)
}
