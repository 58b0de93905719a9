package main

import (
	"testing"

	"github.com/berth-sched/berth/e2e/framework"
)

// TestMain: the add-nodes test starts a local cluster; nothing of it may be left behind.
func TestMain(m *testing.M) { framework.RunIsolated(m) }
