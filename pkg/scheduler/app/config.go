package app

import (
	"fmt"
	"strings"
)

// DefaultConfigOptions are the few settings the default configuration takes from flags.
type DefaultConfigOptions struct {
	Kubeconfig  string
	LeaderElect *bool
	// QPS and Burst of the scheduler's API client; zero keeps upstream's defaults.
	QPS   float32
	Burst int32
}

// DefaultConfig renders berth-scheduler's default KubeSchedulerConfiguration: one profile
// named berth-scheduler with decision records on (DecisionRecord's defaults: the last 1000
// pods, no event summary; `kubectl berth explain` reads them), and leader election on a Lease
// of the same name in kube-system.
func DefaultConfig(o DefaultConfigOptions) string {
	var b strings.Builder
	b.WriteString("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
	b.WriteString("clientConnection:\n")
	fmt.Fprintf(&b, "  kubeconfig: %q\n", o.Kubeconfig)
	if o.QPS > 0 {
		fmt.Fprintf(&b, "  qps: %g\n  burst: %d\n", o.QPS, o.Burst)
	}
	b.WriteString("leaderElection:\n")
	if o.LeaderElect != nil {
		fmt.Fprintf(&b, "  leaderElect: %t\n", *o.LeaderElect)
	}
	fmt.Fprintf(&b, "  resourceName: %s\n  resourceNamespace: kube-system\n", SchedulerName)
	fmt.Fprintf(&b, "profiles:\n- schedulerName: %s\n", SchedulerName)
	b.WriteString("  plugins:\n    multiPoint:\n      enabled:\n      - name: DecisionRecord\n")
	return b.String()
}
