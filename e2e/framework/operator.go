package framework

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/berth-sched/berth/e2e/cluster"
)

// OperatorOptions start bin/berth-operator as a process of the local cluster.
type OperatorOptions struct {
	// Name of the process (default berth-operator).
	Name string
	// Kubeconfig (default the cluster's admin kubeconfig).
	Kubeconfig string
	// LeaderElection on, in LeaseNamespace (default kube-system) under LeaseID (default the
	// operator's own); off: --leader-elect=false, so several may run at once.
	LeaderElection bool
	LeaseNamespace string
	LeaseID        string
	// MetricsAddr (default "0": no metrics server).
	MetricsAddr string
	// HealthPort on loopback (default a free one).
	HealthPort int
	// Args are further flags.
	Args []string
}

// StartOperator runs bin/berth-operator and waits until its /readyz answers (the health port
// is a free loopback port chosen here); the caller stops it with c.StopComponent or leaves it to
// c.Stop.
func StartOperator(ctx context.Context, c *cluster.Cluster, o OperatorOptions) (*cluster.Process, error) {
	if o.Name == "" {
		o.Name = "berth-operator"
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = c.Kubeconfig
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = "0"
	}
	health := o.HealthPort
	if health == 0 {
		var err error
		if health, err = cluster.FreePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"--kubeconfig=" + o.Kubeconfig, "--metrics-bind-address=" + o.MetricsAddr,
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health)}
	if o.LeaderElection {
		ns := o.LeaseNamespace
		if ns == "" {
			ns = "kube-system"
		}
		args = append(args, "--leader-election-namespace="+ns)
		if o.LeaseID != "" {
			args = append(args, "--leader-election-id="+o.LeaseID)
		}
	} else {
		args = append(args, "--leader-elect=false")
	}
	// The rebalancer reads the load watcher, which serves only tokens it can check.
	env, err := c.WatcherReaderEnv(ctx)
	if err != nil {
		return nil, err
	}
	return c.StartComponent(ctx, cluster.ProcessSpec{Name: o.Name, Binary: filepath.Join(c.BinDir, "berth-operator"), Args: append(args, o.Args...), Env: env},
		cluster.HTTPCheck(fmt.Sprintf("http://127.0.0.1:%d/readyz", health)))
}
