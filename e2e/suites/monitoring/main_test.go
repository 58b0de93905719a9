// Package monitoring runs Debian's real Prometheus against Berth's real binaries on the local
// cluster, configured from what the chart renders: the ServiceMonitors' scrape settings (scheme,
// path, TLS, Prometheus' bearer token bound to the chart's metrics-reader ClusterRole), the
// PrometheusRule's alerts and the Grafana dashboard's panel queries.
package monitoring

import (
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

var shared *cluster.Cluster

// TestMain shares one cluster among the tests; everything the suite and its processes
// (Prometheus' TSDB included) put in the temporary directory must be gone after teardown.
func TestMain(m *testing.M) {
	framework.RunWithCluster(m, cluster.Config{
		// berth-scheduler schedules the suite's pods; agents' pods are bound directly. The
		// SPO CRDs are not needed; the tests install the chart's own crds/ (installChartCRDs).
		WithoutDefaultScheduler: true,
		WithoutBerthCRDs:        true,
	}, 3*time.Minute, func(c *cluster.Cluster) { shared = c })
}
