package failover

import (
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// suite is the one cluster both tests share.
var suite *cluster.Cluster

// TestMain starts one cluster (API server, controller manager for Deployments, the stock
// scheduler for the operator's scheduler pods, KWOK for the nodes and pod status) in a private
// temporary directory, runs the tests, stops it, and fails the suite if anything named berth-*
// is left behind.
func TestMain(m *testing.M) {
	framework.RunWithCluster(m, cluster.Config{}, 2*time.Minute, func(c *cluster.Cluster) { suite = c })
}
