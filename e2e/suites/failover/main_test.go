package failover

import (
	"context"
	"fmt"
	"os"
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
	check := framework.IsolateTemp()
	code := run(m)
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover suite: starting the cluster:", err)
		return 1
	}
	defer c.Stop()
	suite = c
	return m.Run()
}
