package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

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
		return Profile{
			Name:       "berth-scheduler + SySched",
			Binary:     cluster.BerthScheduler,
			Profiles:   framework.SySchedProfile(SchedulerName, exs.FullProfile),
			Setup:      syschedSetup,
			PodMutator: syschedPodMutator,
		}
	})
}

var (
	syschedProfiles = exs.SyntheticProfiles(syschedBenchProfiles, 1)
	// Profiles that run SySched share one set of SeccompProfiles and one grant.
	syschedOnce sync.Once
	syschedErr  error
)

// syschedSetup grants the bench scheduler's identity the SPO reads and installs the synthetic
// profiles, once per process.
func syschedSetup(ctx context.Context, c *cluster.Cluster) error {
	syschedOnce.Do(func() { syschedErr = installSySched(ctx, c) })
	return syschedErr
}

func installSySched(ctx context.Context, c *cluster.Cluster) error {
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
	if err := rbac.Apply(ctx, c.Client, only); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	return exs.InstallProfiles(ctx, dyn, syschedProfiles)
}

// syschedPodMutator gives each pod one of the profiles, round robin by index, so Score works on
// real sets rather than every pod being the full profile.
func syschedPodMutator(p *corev1.Pod) {
	i, err := strconv.Atoi(strings.TrimPrefix(p.Name, "pod-"))
	if err != nil {
		panic(fmt.Sprintf("bench pod name %q has no index", p.Name))
	}
	path := exs.LocalhostPath(syschedProfiles[i%len(syschedProfiles)].Name)
	p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &path}}
}
