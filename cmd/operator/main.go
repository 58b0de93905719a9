// Command berth-operator reconciles SecondarySchedulers into berth-scheduler Deployments:
// leader-elected, with /healthz and /readyz on --health-probe-bind-address and /metrics on
// --metrics-bind-address (HTTPS, bearer tokens allowed to get /metrics, unless
// --metrics-secure=false); SIGTERM stops it gracefully (and releases the Lease).
//
// The same binary runs the chart's hooks: --upgrade-crds, --wait-agents-daemonset and
// --cleanup-namespace each do their one job and exit.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

func main() {
	f := bindFlags(flag.CommandLine)
	// --kubeconfig is registered by controller-runtime's config package.
	flag.Parse()
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "berth-operator:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
