// Package monitoring runs Debian's real Prometheus against Berth's real binaries on the local
// cluster, configured from what the chart renders: the ServiceMonitors' scrape settings (scheme,
// path, TLS, Prometheus' bearer token bound to the chart's metrics-reader ClusterRole), the
// PrometheusRule's alerts and the Grafana dashboard's panel queries.
package monitoring

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

var shared *cluster.Cluster

func TestMain(m *testing.M) {
	// Everything the suite and its processes (Prometheus' TSDB included) put in the temporary
	// directory must be gone after teardown.
	tempCheck := framework.IsolateTemp()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	c, err := cluster.Start(ctx, cluster.Config{
		// berth-scheduler schedules the suite's pods; agents' pods are bound directly. The
		// SPO CRDs are not needed; the tests install the chart's own crds/ (installChartCRDs).
		WithoutDefaultScheduler: true,
		WithoutBerthCRDs:        true,
	})
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
