package tenant

import (
	"testing"

	"github.com/berth-sched/berth/e2e/framework"
)

func TestMain(m *testing.M) { framework.RunIsolated(m) }
