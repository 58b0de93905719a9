// Package app builds the berth-scheduler command: the upstream kube-scheduler command with
// Berth's plugin registry and Berth's defaults (profile and Lease named berth-scheduler), so it
// runs beside the cluster's default scheduler without a configuration file.
package app

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/spf13/cobra"
	// Why: leader_election_master_status on /metrics. Upstream's kube-scheduler does not
	// register client-go's leader-election metrics; Berth's no-leader alert reads them, so it
	// needs no kube-state-metrics.
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/berth-sched/berth/pkg/scheduler/registry"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

// SchedulerName is the profile name workloads opt in with (spec.schedulerName) and the name
// of the Lease the scheduler's replicas elect a leader on.
const SchedulerName = "berth-scheduler"

// NewCommand returns the berth-scheduler command. extra adds plugins beyond Berth's registry
// (tests use it).
func NewCommand(extra ...app.Option) *cobra.Command {
	// The default configuration is written to a temporary directory, which must not outlive the
	// start: upstream reads --config in Setup before it builds the registry, so the last
	// registry option removes the directory (and a deferred removal covers an early failure).
	// The scheduler then runs for weeks and usually ends by signal or exit, never by returning,
	// so a removal at the end would leave one /tmp/berth-scheduler-* per start behind.
	var tmpDir atomic.Pointer[string]
	removeTmp := func() {
		if d := tmpDir.Swap(nil); d != nil {
			_ = os.RemoveAll(*d)
		}
	}
	opts := append(registry.Options(), extra...)
	opts = append(opts, func(runtime.Registry) error { removeTmp(); return nil })
	cmd, upstream := newSchedulerCommand(opts)
	cmd.Use = SchedulerName
	cmd.Short = "Berth's kube-scheduler with real-load, syscall, image-locality and isolation plugins"
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if c.Flags().Changed("config") {
			// Berth's checks upstream lacks (negative weights, plugin names, Berth plugin args),
			// the same the operator runs before a rollout: refuse at start, naming the field,
			// instead of running with inverted scores or crash-looping later.
			if err := validateConfigFile(c.Flags().Lookup("config").Value.String()); err != nil {
				return err
			}
		} else {
			// Upstream resets the configuration to its own defaults (profile default-scheduler,
			// Lease kube-scheduler) unless --config is given; that would make Berth fight the
			// default scheduler for its Lease. Give it Berth's defaults through a file instead.
			path, err := writeDefaultConfig(c)
			if err != nil {
				return err
			}
			dir := filepath.Dir(path)
			tmpDir.Store(&dir)
			defer removeTmp()
			if err := c.Flags().Set("config", path); err != nil {
				return err
			}
		}
		return upstream(c, args)
	}
	return cmd
}

func validateConfigFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading --config: %w", err)
	}
	if _, err := schedconfig.Validate(data); err != nil {
		return fmt.Errorf("invalid --config %s: %s", path, schedconfig.ErrorMessage(err))
	}
	return nil
}

func writeDefaultConfig(c *cobra.Command) (string, error) {
	flag := func(name string) string {
		if f := c.Flags().Lookup(name); f != nil && f.Changed {
			return f.Value.String()
		}
		return ""
	}
	cfg := DefaultConfig(DefaultConfigOptions{
		Kubeconfig: flag("kubeconfig"),
		LeaderElect: func() *bool {
			if v := flag("leader-elect"); v != "" {
				b := v == "true"
				return &b
			}
			return nil
		}(),
	})
	dir, err := os.MkdirTemp("", "berth-scheduler-")
	if err != nil {
		return "", fmt.Errorf("writing default configuration: %w", err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", fmt.Errorf("writing default configuration: %w", err)
	}
	return path, nil
}
