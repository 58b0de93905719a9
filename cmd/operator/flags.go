package main

import (
	"flag"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	isolationwebhook "github.com/berth-sched/berth/pkg/isolation/webhook"
	"github.com/berth-sched/berth/pkg/operator"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// flags is berth-operator's command line: the manager's options, and those of the one-shot
// hooks that run instead of it.
type flags struct {
	o               operator.Options
	metricsSecure   bool
	podConfigPolicy func() (podconfig.Policy, error)
	isolation       *isolationwebhook.Flags
	rebalance       bool
	// rebalanceProtected is comma-separated, as the chart passes it.
	rebalanceProtected string
	zap                zap.Options

	upgradeCRDs        bool
	upgradeCRDsTimeout time.Duration
	agents             operator.AgentReadyOptions
	agentsTimeout      time.Duration
	// cleanup's OperatorLease and OperatorLeaseNamespace come from the leader-election flags.
	cleanup        operator.CleanupOptions
	cleanupTimeout time.Duration
}

// bindFlags registers every flag of berth-operator on fs.
func bindFlags(fs *flag.FlagSet) *flags {
	f := &flags{}
	f.bindManager(fs)
	f.bindControllers(fs)
	f.bindHooks(fs)
	f.bindCleanup(fs)
	f.zap.BindFlags(fs)
	return f
}

// bindManager registers the manager's flags: its endpoints, leader election and shutdown.
func (f *flags) bindManager(fs *flag.FlagSet) {
	o := &f.o
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics (0 disables it)")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true,
		"serve /metrics over HTTPS (self-signed certificate) to bearer tokens allowed to get /metrics (TokenReview + SubjectAccessReview); "+
			"false serves plain HTTP to anyone, for local debugging only")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElection, "leader-elect", true, "elect a leader so only one replica reconciles")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "berth-operator", "name of the leader-election Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "",
		"namespace of the leader-election Lease (default: the pod's namespace; required outside a cluster)")
	fs.DurationVar(&o.GracefulShutdown, "graceful-shutdown-timeout", 30*time.Second, "how long to wait for reconciles to finish on shutdown")
}

// bindControllers registers the flags of the optional controllers and webhooks.
func (f *flags) bindControllers(fs *flag.FlagSet) {
	fs.BoolVar(&f.o.PodConfig, "podconfig", false,
		"run the PodConfig controller (address management for runtime network attachments; needs the PodConfig and IPAllocation CRDs)")
	f.podConfigPolicy = podconfig.BindPolicyFlags(fs)
	fs.DurationVar(&f.o.PodConfigRemovalTimeout, "podconfig-removal-timeout", 5*time.Minute,
		"how long a pod's links may wait for removal on a node that is gone or not Ready before their addresses are freed anyway")
	fs.BoolVar(&f.o.Grants, "grants", false,
		"run the Grants controller: in each namespace granted a PodNetwork or InstanceClass, a read-only Grants object tenants read, "+
			"and each InstanceClass's Granted condition (needs the Grants and InstanceClass CRDs; networks are listed with --podconfig)")
	f.isolation = isolationwebhook.BindFlags(fs)
	fs.BoolVar(&f.rebalance, "rebalancer", false,
		"run the Rebalancer controller (hot-spot relief: evicts berth-scheduled pods off nodes that stay hot; needs the Rebalancer CRD and eviction RBAC)")
	fs.StringVar(&f.rebalanceProtected, "rebalancer-protected-namespaces", "",
		"comma-separated namespaces the rebalancer never evicts from, besides kube-system (the chart passes its release namespace)")
}

// bindHooks registers the flags of the install and upgrade hooks.
func (f *flags) bindHooks(fs *flag.FlagSet) {
	fs.StringVar(&f.agents.DaemonSet, "wait-agents-daemonset", "",
		"instead of operating: wait until this agent DaemonSet (in --wait-agents-namespace) is rolled out and every agent on a Ready node "+
			"is Ready, else fail naming each agent that is not and why (the chart's post-install/post-upgrade hook with agent.criSocket)")
	fs.StringVar(&f.agents.Namespace, "wait-agents-namespace", "", "with --wait-agents-daemonset: its namespace")
	fs.IntVar(&f.agents.Port, "wait-agents-port", 9101, "with --wait-agents-daemonset: the agents' /readyz port")
	fs.DurationVar(&f.agentsTimeout, "wait-agents-timeout", 5*time.Minute, "how long --wait-agents-daemonset may wait")
	fs.BoolVar(&f.upgradeCRDs, "upgrade-crds", false,
		"apply Berth's CRDs as this build generated them (server-side, taking their fields over), wait until they are established, and exit: the chart's pre-upgrade hook, since Helm never upgrades a chart's crds/")
	fs.DurationVar(&f.upgradeCRDsTimeout, "upgrade-crds-timeout", 2*time.Minute, "how long --upgrade-crds may take")
}

// bindCleanup registers the flags of the pre-delete hook.
func (f *flags) bindCleanup(fs *flag.FlagSet) {
	co := &f.cleanup
	fs.StringVar(&co.Namespace, "cleanup-namespace", "",
		"instead of operating: (with --cleanup-podconfigs) delete every PodConfig and wait for them, stop the operator "+
			"(--cleanup-operator-deployment), (with --cleanup-agent-daemonset, --cleanup-nodeimages) stop the agents and delete the NodeImages, "+
			"delete every SecondaryScheduler in this namespace "+
			"and their cluster-scoped RBAC, wait for their scheduler pods to go, delete the leader-election Leases "+
			"(--leader-election-id and the schedulers'), and exit (the chart's pre-delete hook)")
	fs.StringVar(&co.OperatorDeployment, "cleanup-operator-deployment", "",
		"with --cleanup-namespace: the operator's Deployment in that namespace, scaled to 0 before its Lease is deleted (required)")
	fs.DurationVar(&f.cleanupTimeout, "cleanup-timeout", 2*time.Minute, "how long --cleanup-namespace may take")
	fs.BoolVar(&co.PodConfigs, "cleanup-podconfigs", false,
		"with --cleanup-namespace: first delete every PodConfig of the cluster while the operator and the agents still run and wait "+
			"until they are gone (links removed, addresses freed); once the operator is stopped, release the PodNetworks' finalizer "+
			"and delete the IPAllocations")
	fs.StringVar(&co.AgentDaemonSet, "cleanup-agent-daemonset", "",
		"with --cleanup-namespace: the agent DaemonSet in that namespace, deleted (and its pods waited for) before NodeImages are deleted")
	fs.BoolVar(&co.NodeImages, "cleanup-nodeimages", false, "with --cleanup-namespace: delete every NodeImages object")
	fs.BoolVar(&co.Grants, "cleanup-grants", false, "with --cleanup-namespace: delete every Grants object once the operator is stopped")
	fs.BoolVar(&co.IsolationMarkers, "cleanup-isolation-markers", false,
		"with --cleanup-namespace: remove the isolation autoscaler marker label from every node once the operator, its writer, is stopped")
}
