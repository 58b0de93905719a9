// Package admission runs the instance-isolation admission path against the real API server:
// the chart's MutatingWebhookConfiguration (pointed at the operator on loopback) and
// ValidatingAdmissionPolicy, the real berth-operator binary serving the webhook over TLS with
// its own rotating certificates and the chart's RBAC, and the real berth-scheduler with
// InstanceIsolation on KWOK pool nodes.
package admission

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// shared is the suite's one control plane.
var shared *cluster.Cluster

func TestMain(m *testing.M) {
	// Everything the suite and its processes leave in the temporary directory must be gone
	// after teardown (cluster directory, operator and scheduler configurations).
	tempCheck := framework.IsolateTemp()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	// Pods here go to berth-scheduler or stay unscheduled: the stock scheduler is not needed
	// (the controller-manager is: namespaces' default ServiceAccounts, KWOK nodes' taints).
	c, err := cluster.Start(ctx, cluster.Config{WithoutDefaultScheduler: true, WithoutBerthCRDs: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local cluster:", err)
		os.Exit(1)
	}
	shared = c
	code := m.Run()
	c.Stop()
	if err := tempCheck(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}
