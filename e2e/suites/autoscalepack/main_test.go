// Package autoscalepack proves seed 001's efficiency with a real autoscaler: the nodes the
// chart's pack preset leaves empty are removed by Karpenter, and the stock scheduler leaves none.
package autoscalepack

import (
	"testing"

	"github.com/berth-sched/berth/e2e/framework"
)

// TestMain fails the suite when anything it or the processes it started put in the temporary
// directory outlives teardown.
func TestMain(m *testing.M) { framework.RunIsolated(m) }
