// Package rebalancer tests hot-spot relief end to end on the local cluster: KWOK nodes whose load
// comes from berth-agent processes reading fixture /proc files, berth-loadwatcher, berth-scheduler
// (TargetLoadPacking) and berth-operator with --rebalancer, every one the real binary as its own
// process. Each test uses its own node pool (a label), namespace and Rebalancer.
package rebalancer

import (
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

var shared *cluster.Cluster

func TestMain(m *testing.M) {
	framework.RunWithCluster(m, cluster.Config{
		// The stock scheduler places the default-scheduler pods the rebalancer must leave alone.
		WithoutBerthCRDs: true,
	}, 3*time.Minute, func(c *cluster.Cluster) { shared = c })
}
