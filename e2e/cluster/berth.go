package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/pkg/scheduler/rbac"
)

// BerthSchedulerOptions start berth-scheduler as a process of the cluster.
type BerthSchedulerOptions struct {
	// Config is a KubeSchedulerConfiguration; its clientConnection.kubeconfig is filled in.
	// Empty: the scheduler's built-in default (profile and Lease berth-scheduler).
	Config string
	// Name of the process (log and pid file); default berth-scheduler.
	Name string
	// Args are extra flags.
	Args []string
}

// BerthSchedulerProcess is a running berth-scheduler.
type BerthSchedulerProcess struct {
	*Process
	// Port of its secure serving (/healthz, /readyz, /metrics).
	Port int
}

// StartBerthScheduler grants berth-scheduler's identity the RBAC a second scheduler needs (the
// objects the chart and operator install too), then runs bin/berth-scheduler as that identity.
func (c *Cluster) StartBerthScheduler(ctx context.Context, o BerthSchedulerOptions) (*BerthSchedulerProcess, error) {
	if o.Name == "" {
		o.Name = BerthScheduler
	}
	if err := rbac.Apply(ctx, c.Client, rbac.SchedulerRBAC(rbac.UserSubject(BerthSchedulerIdentity.User), "berth-scheduler", "kube-system")); err != nil {
		return nil, fmt.Errorf("%s: granting RBAC: %w", o.Name, err)
	}
	kc, err := c.WriteKubeconfig(o.Name, BerthSchedulerIdentity)
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
	}
	if o.Config == "" {
		args = append(args, "--kubeconfig="+kc)
	} else {
		path := filepath.Join(c.Dir, o.Name+"-config.yaml")
		if err := os.WriteFile(path, []byte(WithKubeconfig(o.Config, kc)), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--config="+path)
	}
	args = append(args, o.Args...)
	p, err := c.StartComponent(ctx, ProcessSpec{Name: o.Name, Binary: filepath.Join(c.BinDir, BerthScheduler), Args: args},
		HTTPCheck(fmt.Sprintf("https://127.0.0.1:%d/readyz", port)))
	if err != nil {
		return nil, err
	}
	return &BerthSchedulerProcess{Process: p, Port: port}, nil
}

// WithKubeconfig sets clientConnection.kubeconfig in a KubeSchedulerConfiguration document.
func WithKubeconfig(config, kubeconfig string) string {
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil || doc == nil {
		// Not ours to judge: the scheduler reports a malformed configuration itself.
		return config
	}
	cc, _ := doc["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["kubeconfig"] = kubeconfig
	doc["clientConnection"] = cc
	out, err := yaml.Marshal(doc)
	if err != nil {
		return config
	}
	return string(out)
}
