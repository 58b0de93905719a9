package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/bench/exs"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/scheduler/rbac"
)

// syschedBenchProfiles is how many synthetic seccomp profiles the SySched run's pods spread over.
const syschedBenchProfiles = 10

func init() {
	RegisterProfile(func() Profile {
		profs := exs.SyntheticProfiles(syschedBenchProfiles, 1)
		return Profile{
			Name:     "berth-scheduler + SySched",
			Binary:   cluster.BerthScheduler,
			Profiles: framework.SySchedProfile(SchedulerName, exs.FullProfile),
			Setup: func(ctx context.Context, c *cluster.Cluster) error {
				// Bench schedulers run as system:kube-scheduler, whose built-in role cannot
				// read SPO objects; grant only that, as the chart does for berth-scheduler.
				objs := rbac.SchedulerRBAC(rbac.UserSubject(cluster.SchedulerIdentity.User), "bench-sysched", "kube-system")
				only := rbac.Objects{ClusterRoles: objs.ClusterRoles}
				for _, b := range objs.ClusterRoleBindings {
					if b.RoleRef.Name == objs.ClusterRoles[0].Name {
						only.ClusterRoleBindings = append(only.ClusterRoleBindings, b)
					}
				}
				if len(only.ClusterRoles) != 1 || len(only.ClusterRoleBindings) != 1 {
					return fmt.Errorf("unexpected RBAC shape for the SPO reads: %d roles, %d bindings", len(only.ClusterRoles), len(only.ClusterRoleBindings))
				}
				objs = only
				if err := rbac.Apply(ctx, c.Client, objs); err != nil {
					return err
				}
				dyn, err := dynamic.NewForConfig(c.RESTConfig)
				if err != nil {
					return err
				}
				return exs.InstallProfiles(ctx, dyn, profs)
			},
			// Each pod gets one of the profiles, round robin by index, so Score works on real
			// sets rather than every pod being the full profile.
			PodMutator: func(p *corev1.Pod) {
				i, err := strconv.Atoi(strings.TrimPrefix(p.Name, "pod-"))
				if err != nil {
					panic(fmt.Sprintf("bench pod name %q has no index", p.Name))
				}
				path := exs.LocalhostPath(profs[i%len(profs)].Name)
				p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &path}}
			},
		}
	})
}
