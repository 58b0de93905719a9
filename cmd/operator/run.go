package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/berth-sched/berth/pkg/isolation/marker"
	"github.com/berth-sched/berth/pkg/operator"
	"github.com/berth-sched/berth/pkg/rebalancer"
)

// usageError is a command line that cannot run: main exits 2 for it, as for a flag that does
// not parse, and 1 for every other error.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// run does what the command line asks: one of the chart's hooks, else the operator until
// SIGTERM.
func run(f *flags) error {
	o, err := f.managerOptions()
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap)))
	log := ctrl.Log.WithName("berth-operator")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no API server configuration (use --kubeconfig or run in a pod): %w", err)
	}
	switch {
	case f.upgradeCRDs:
		if err := upgradeCRDs(cfg, f.upgradeCRDsTimeout); err != nil {
			return fmt.Errorf("upgrade-crds: %w", err)
		}
		log.Info("CRDs upgraded")
		return nil
	case f.agents.DaemonSet != "":
		return waitAgents(cfg, f.agents, f.agentsTimeout)
	case f.cleanup.Namespace != "":
		return cleanup(cfg, f, log)
	}
	return operate(cfg, o, f, log)
}

// managerOptions checks the flags that need more than parsing and completes the manager's
// options from them.
func (f *flags) managerOptions() (operator.Options, error) {
	o := f.o
	o.MetricsInsecure = !f.metricsSecure
	if o.PodConfig {
		var err error
		if o.PodConfigPolicy, err = f.podConfigPolicy(); err != nil {
			return o, usageError{fmt.Errorf("podconfig policy: %w", err)}
		}
	}
	if err := f.isolation.Check(); err != nil {
		return o, usageError{fmt.Errorf("instance-isolation webhook: %w", err)}
	}
	// why: the marker's writer watches every pod; cache them trimmed (operator.Options.TrimCache).
	if on, _, _, _ := f.isolation.Marker(); on {
		o.TrimCache = true
	}
	return o, nil
}

// operate runs the manager with the operator's controllers and the optional ones the flags
// turn on, until a signal stops it.
func operate(cfg *rest.Config, o operator.Options, f *flags, log logr.Logger) error {
	mgr, err := operator.NewManager(cfg, o)
	if err != nil {
		return err
	}
	if err := setupOptional(mgr, f); err != nil {
		return err
	}
	log.Info("starting", "metrics", o.MetricsAddr, "metricsSecure", f.metricsSecure, "health", o.HealthAddr, "leaderElect", o.LeaderElection,
		"podconfig", o.PodConfig, "grants", o.Grants, "rebalancer", f.rebalance)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// setupOptional adds to mgr the instance-isolation webhook, the isolation marker and the
// rebalancer, each when its flags turn it on.
func setupOptional(mgr manager.Manager, f *flags) error {
	if err := f.isolation.Setup(mgr, ctrl.Log.WithName("isolation-webhook")); err != nil {
		return fmt.Errorf("instance-isolation webhook: %w", err)
	}
	on, c, grace, err := f.isolation.Marker()
	if err != nil {
		return fmt.Errorf("isolation marker: %w", err)
	}
	if on {
		// why: the single writer of the autoscaler-visible marker; leader-elected with the
		// operator's other controllers, so one replica writes at a time.
		if err := marker.Setup(mgr, c, grace); err != nil {
			return fmt.Errorf("isolation marker: %w", err)
		}
	}
	if f.rebalance {
		if err := rebalancer.Setup(mgr, strings.Split(f.rebalanceProtected, ",")); err != nil {
			return fmt.Errorf("rebalancer: %w", err)
		}
	}
	return nil
}

// upgradeCRDs is the chart's pre-upgrade hook: Berth's CRDs as this build generated them.
func upgradeCRDs(cfg *rest.Config, timeout time.Duration) error {
	return runOnce(cfg, "upgrade-crds", timeout, func(ctx context.Context, c client.Client) error {
		objs, err := operator.BerthCRDs()
		if err != nil {
			return err
		}
		return operator.UpgradeCRDs(ctx, c, objs)
	})
}

// cleanup is the chart's pre-delete hook (operator.Cleanup). The operator's Lease is the one
// its leader-election flags name.
func cleanup(cfg *rest.Config, f *flags, log logr.Logger) error {
	co := f.cleanup
	co.OperatorLease, co.OperatorLeaseNamespace = f.o.LeaderElectionID, f.o.LeaderElectionNamespace
	if co.OperatorDeployment == "" {
		return usageError{fmt.Errorf("--cleanup-namespace needs --cleanup-operator-deployment (the operator must stop before its Lease is deleted)")}
	}
	err := runOnce(cfg, "cleanup", f.cleanupTimeout, func(ctx context.Context, c client.Client) error { return operator.Cleanup(ctx, c, co) })
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	log.Info("cleaned up", "namespace", co.Namespace)
	return nil
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
