package podconfig

import (
	"testing"

	"github.com/berth-sched/berth/e2e/framework"
)

// TestMain runs the suite in a private temporary directory and fails it if anything named
// berth-* is left there once the cluster has stopped.
func TestMain(m *testing.M) { framework.RunIsolated(m) }
