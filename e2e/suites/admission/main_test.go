// Package admission runs the instance-isolation admission path against the real API server:
// the chart's MutatingWebhookConfiguration (pointed at the operator on loopback) and
// ValidatingAdmissionPolicies, the real berth-operator binary serving the webhook over TLS with
// its own rotating certificates and the chart's RBAC, and the real berth-scheduler with
// InstanceIsolation on KWOK pool nodes.
package admission

import (
	"testing"

	"github.com/berth-sched/berth/e2e/framework"
)

// TestMain fails the suite when anything it or the processes it started (cluster directory,
// operator and scheduler configurations) put in the temporary directory outlives teardown.
func TestMain(m *testing.M) { framework.RunIsolated(m) }
