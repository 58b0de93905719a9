package autoscale

import (
	"testing"

	"github.com/berth-sched/berth/e2e/framework"
)

// TestMain fails the suite when anything it or the processes it started put in the temporary
// directory outlives teardown.
func TestMain(m *testing.M) { framework.RunIsolated(m) }
