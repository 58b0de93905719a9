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

// SchedulerOptions start a scheduler binary as a process of the cluster.
type SchedulerOptions struct {
	// Binary in BinDir: berth-scheduler (default) or kube-scheduler (the stock one, for comparisons).
	Binary string
	// Name of the process (log and pid file); default the binary's name.
	Name string
	// Identity the scheduler authenticates as; default berth-scheduler's own user, which
	// is granted the RBAC a second scheduler needs first.
	Identity *Identity
	// Config is a KubeSchedulerConfiguration; its clientConnection.kubeconfig is filled in.
	// Empty: the scheduler's built-in default (for berth-scheduler: profile and Lease
	// berth-scheduler).
	Config string
	// Args are extra flags.
	Args []string
}

// BerthSchedulerOptions is kept as the name the suites use for berth-scheduler's options.
type BerthSchedulerOptions = SchedulerOptions

// SchedulerProcess is a running scheduler.
type SchedulerProcess struct {
	*Process
	// Port of its secure serving (/healthz, /readyz, /metrics).
	Port int
}

// StartBerthScheduler runs bin/berth-scheduler (see StartScheduler).
func (c *Cluster) StartBerthScheduler(ctx context.Context, o SchedulerOptions) (*SchedulerProcess, error) {
	o.Binary = BerthScheduler
	return c.StartScheduler(ctx, o)
}

// StartScheduler runs a scheduler binary and waits until it is ready. For berth-scheduler's
// identity it first applies the RBAC the chart and operator install too, so the suites test
// what users get.
func (c *Cluster) StartScheduler(ctx context.Context, o SchedulerOptions) (*SchedulerProcess, error) {
	if o.Binary == "" {
		o.Binary = BerthScheduler
	}
	if o.Name == "" {
		o.Name = o.Binary
	}
	id := BerthSchedulerIdentity
	if o.Identity != nil {
		id = *o.Identity
	}
	if id.User == BerthSchedulerIdentity.User {
		if err := rbac.Apply(ctx, c.Client, rbac.SchedulerRBAC(rbac.UserSubject(id.User), "berth-scheduler", "kube-system")); err != nil {
			return nil, fmt.Errorf("%s: granting RBAC: %w", o.Name, err)
		}
	}
	kc, err := c.WriteKubeconfig(o.Name, id)
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
	var env []string
	if o.Binary == BerthScheduler {
		// The load-aware plugins read the watcher, which serves only tokens it can check.
		if env, err = c.WatcherReaderEnv(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Name, err)
		}
	}
	p, err := c.StartComponent(ctx, ProcessSpec{Name: o.Name, Binary: filepath.Join(c.BinDir, o.Binary), Args: args, Env: env},
		HTTPCheck(fmt.Sprintf("https://127.0.0.1:%d/readyz", port)))
	if err != nil {
		return nil, err
	}
	return &SchedulerProcess{Process: p, Port: port}, nil
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
