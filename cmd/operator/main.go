// Command berth-operator reconciles SecondarySchedulers into berth-scheduler Deployments:
// leader-elected, with /healthz and /readyz on --health-probe-bind-address and /metrics on
// --metrics-bind-address (HTTPS, bearer tokens allowed to get /metrics, unless
// --metrics-secure=false); SIGTERM stops it gracefully (and releases the Lease).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-sched/berth/pkg/isolation/marker"
	isolationwebhook "github.com/berth-sched/berth/pkg/isolation/webhook"
	"github.com/berth-sched/berth/pkg/operator"
	"github.com/berth-sched/berth/pkg/podconfig"
	"github.com/berth-sched/berth/pkg/rebalancer"
)

func main() {
	var o operator.Options
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics (0 disables it)")
	metricsSecure := flag.Bool("metrics-secure", true,
		"serve /metrics over HTTPS (self-signed certificate) to bearer tokens allowed to get /metrics (TokenReview + SubjectAccessReview); "+
			"false serves plain HTTP to anyone, for local debugging only")
	flag.StringVar(&o.HealthAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&o.LeaderElection, "leader-elect", true, "elect a leader so only one replica reconciles")
	flag.StringVar(&o.LeaderElectionID, "leader-election-id", "berth-operator", "name of the leader-election Lease")
	flag.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "",
		"namespace of the leader-election Lease (default: the pod's namespace; required outside a cluster)")
	flag.DurationVar(&o.GracefulShutdown, "graceful-shutdown-timeout", 30*time.Second, "how long to wait for reconciles to finish on shutdown")
	cleanupNS := flag.String("cleanup-namespace", "",
		"instead of operating: (with --cleanup-podconfigs) delete every PodConfig and wait for them, stop the operator "+
			"(--cleanup-operator-deployment), (with --cleanup-agent-daemonset, --cleanup-nodeimages) stop the agents and delete the NodeImages, "+
			"delete every SecondaryScheduler in this namespace "+
			"and their cluster-scoped RBAC, wait for their scheduler pods to go, delete the leader-election Leases "+
			"(--leader-election-id and the schedulers'), and exit (the chart's pre-delete hook)")
	cleanupDeployment := flag.String("cleanup-operator-deployment", "",
		"with --cleanup-namespace: the operator's Deployment in that namespace, scaled to 0 before its Lease is deleted (required)")
	cleanupTimeout := flag.Duration("cleanup-timeout", 2*time.Minute, "how long --cleanup-namespace may take")
	cleanupPodConfigs := flag.Bool("cleanup-podconfigs", false,
		"with --cleanup-namespace: first delete every PodConfig of the cluster while the operator and the agents still run and wait "+
			"until they are gone (links removed, addresses freed); once the operator is stopped, release the PodNetworks' finalizer "+
			"and delete the IPAllocations")
	cleanupAgents := flag.String("cleanup-agent-daemonset", "",
		"with --cleanup-namespace: the agent DaemonSet in that namespace, deleted (and its pods waited for) before NodeImages are deleted")
	cleanupNodeImages := flag.Bool("cleanup-nodeimages", false, "with --cleanup-namespace: delete every NodeImages object")
	cleanupGrants := flag.Bool("cleanup-grants", false, "with --cleanup-namespace: delete every Grants object once the operator is stopped")
	cleanupMarkers := flag.Bool("cleanup-isolation-markers", false,
		"with --cleanup-namespace: remove the isolation autoscaler marker label from every node once the operator, its writer, is stopped")
	var agents operator.AgentReadyOptions
	flag.StringVar(&agents.DaemonSet, "wait-agents-daemonset", "",
		"instead of operating: wait until this agent DaemonSet (in --wait-agents-namespace) is rolled out and every agent on a Ready node "+
			"is Ready, else fail naming each agent that is not and why (the chart's post-install/post-upgrade hook with agent.criSocket)")
	flag.StringVar(&agents.Namespace, "wait-agents-namespace", "", "with --wait-agents-daemonset: its namespace")
	flag.IntVar(&agents.Port, "wait-agents-port", 9101, "with --wait-agents-daemonset: the agents' /readyz port")
	agentsTimeout := flag.Duration("wait-agents-timeout", 5*time.Minute, "how long --wait-agents-daemonset may wait")
	upgradeCRDs := flag.Bool("upgrade-crds", false,
		"apply Berth's CRDs as this build generated them (server-side, taking their fields over), wait until they are established, and exit: the chart's pre-upgrade hook, since Helm never upgrades a chart's crds/")
	upgradeCRDsTimeout := flag.Duration("upgrade-crds-timeout", 2*time.Minute, "how long --upgrade-crds may take")
	flag.BoolVar(&o.PodConfig, "podconfig", false,
		"run the PodConfig controller (address management for runtime network attachments; needs the PodConfig and IPAllocation CRDs)")
	podConfigPolicy := podconfig.BindPolicyFlags(flag.CommandLine)
	flag.DurationVar(&o.PodConfigRemovalTimeout, "podconfig-removal-timeout", 5*time.Minute,
		"how long a pod's links may wait for removal on a node that is gone or not Ready before their addresses are freed anyway")
	flag.BoolVar(&o.Grants, "grants", false,
		"run the Grants controller: in each namespace granted a PodNetwork or InstanceClass, a read-only Grants object tenants read, "+
			"and each InstanceClass's Granted condition (needs the Grants and InstanceClass CRDs; networks are listed with --podconfig)")
	isolation := isolationwebhook.BindFlags(flag.CommandLine)
	rebalance := flag.Bool("rebalancer", false,
		"run the Rebalancer controller (hot-spot relief: evicts berth-scheduled pods off nodes that stay hot; needs the Rebalancer CRD and eviction RBAC)")
	rebalanceProtected := flag.String("rebalancer-protected-namespaces", "",
		"comma-separated namespaces the rebalancer never evicts from, besides kube-system (the chart passes its release namespace)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	// --kubeconfig is registered by controller-runtime's config package.
	flag.Parse()
	o.MetricsInsecure = !*metricsSecure
	if o.PodConfig {
		var err error
		if o.PodConfigPolicy, err = podConfigPolicy(); err != nil {
			fmt.Fprintln(os.Stderr, "berth-operator: podconfig policy:", err)
			os.Exit(2)
		}
	}
	if err := isolation.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "berth-operator: instance-isolation webhook:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("berth-operator")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-operator: no API server configuration (use --kubeconfig or run in a pod):", err)
		os.Exit(1)
	}
	if *upgradeCRDs {
		if err := runOnce(cfg, "upgrade-crds", *upgradeCRDsTimeout, func(ctx context.Context, c client.Client) error {
			objs, err := operator.BerthCRDs()
			if err != nil {
				return err
			}
			return operator.UpgradeCRDs(ctx, c, objs)
		}); err != nil {
			fmt.Fprintln(os.Stderr, "berth-operator: upgrade-crds:", err)
			os.Exit(1)
		}
		log.Info("CRDs upgraded")
		return
	}
	if agents.DaemonSet != "" {
		if err := waitAgents(cfg, agents, *agentsTimeout); err != nil {
			fmt.Fprintln(os.Stderr, "berth-operator:", err)
			os.Exit(1)
		}
		return
	}
	if *cleanupNS != "" {
		co := operator.CleanupOptions{Namespace: *cleanupNS, OperatorDeployment: *cleanupDeployment,
			OperatorLease: o.LeaderElectionID, OperatorLeaseNamespace: o.LeaderElectionNamespace,
			PodConfigs: *cleanupPodConfigs, AgentDaemonSet: *cleanupAgents, NodeImages: *cleanupNodeImages, Grants: *cleanupGrants,
			IsolationMarkers: *cleanupMarkers}
		if co.OperatorDeployment == "" {
			fmt.Fprintln(os.Stderr, "berth-operator: --cleanup-namespace needs --cleanup-operator-deployment (the operator must stop before its Lease is deleted)")
			os.Exit(2)
		}
		if err := cleanup(cfg, co, *cleanupTimeout); err != nil {
			fmt.Fprintln(os.Stderr, "berth-operator: cleanup:", err)
			os.Exit(1)
		}
		log.Info("cleaned up", "namespace", *cleanupNS)
		return
	}
	mgr, err := operator.NewManager(cfg, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-operator:", err)
		os.Exit(1)
	}
	if err := isolation.Setup(mgr, ctrl.Log.WithName("isolation-webhook")); err != nil {
		fmt.Fprintln(os.Stderr, "berth-operator: instance-isolation webhook:", err)
		os.Exit(1)
	}
	if on, c, grace, err := isolation.Marker(); err != nil {
		fmt.Fprintln(os.Stderr, "berth-operator: isolation marker:", err)
		os.Exit(1)
	} else if on {
		// why: the single writer of the autoscaler-visible marker; leader-elected with the
		// operator's other controllers, so one replica writes at a time.
		if err := marker.Setup(mgr, c, grace); err != nil {
			fmt.Fprintln(os.Stderr, "berth-operator: isolation marker:", err)
			os.Exit(1)
		}
	}
	if *rebalance {
		if err := rebalancer.Setup(mgr, strings.Split(*rebalanceProtected, ",")); err != nil {
			fmt.Fprintln(os.Stderr, "berth-operator: rebalancer:", err)
			os.Exit(1)
		}
	}
	log.Info("starting", "metrics", o.MetricsAddr, "metricsSecure", *metricsSecure, "health", o.HealthAddr, "leaderElect", o.LeaderElection,
		"podconfig", o.PodConfig, "grants", o.Grants, "rebalancer", *rebalance)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "berth-operator:", err)
		os.Exit(1)
	}
	log.Info("stopped")
}

func cleanup(cfg *rest.Config, o operator.CleanupOptions, timeout time.Duration) error {
	return runOnce(cfg, "cleanup", timeout, func(ctx context.Context, c client.Client) error { return operator.Cleanup(ctx, c, o) })
}

func waitAgents(cfg *rest.Config, o operator.AgentReadyOptions, timeout time.Duration) error {
	return runOnce(cfg, "wait-agents", timeout, func(ctx context.Context, c client.Client) error { return operator.WaitAgentsReady(ctx, c, o) })
}

// runOnce runs a one-shot subcommand (logging as name) with a client of the operator's
// scheme, until it returns, timeout passes or a signal arrives.
func runOnce(cfg *rest.Config, name string, timeout time.Duration, run func(context.Context, client.Client) error) error {
	scheme, err := operator.Scheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctrl.SetupSignalHandler(), timeout)
	defer cancel()
	return run(ctrl.LoggerInto(ctx, ctrl.Log.WithName(name)), c)
}
