// Package loadaware tests real-load-aware scheduling against the real control plane: the
// load watcher's TokenReview-based agent identity, a real Prometheus scraping real agents, and
// berth-agent → berth-loadwatcher → berth-scheduler (TargetLoadPacking) end to end, every
// Berth component as its own process.
package loadaware

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// shared is one control plane for the package: each test uses its own nodes, namespaces and
// processes, so they do not see each other (and the shared 2-core CI machine starts one
// apiserver instead of three).
var shared *cluster.Cluster

// TestMain shares one cluster among the tests; everything the suite and its processes put in
// the temporary directory (cluster directory, schedulers' default configurations, fixture
// /proc writers) must be gone after teardown.
func TestMain(m *testing.M) {
	framework.RunWithCluster(m, cluster.Config{
		// Pods here are either bound directly (agent pods) or by berth-scheduler: the stock
		// scheduler is not needed (the controller-manager is: default service accounts and
		// lifting the not-ready taint off KWOK nodes).
		WithoutDefaultScheduler: true,
		WithoutBerthCRDs:        true,
	}, 3*time.Minute, func(c *cluster.Cluster) { shared = c })
}

// metricLine returns the first line of a Prometheus text page that starts with prefix.
func metricLine(page, prefix string) (string, bool) {
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

func getText(ctx context.Context, client *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

var deleteNow = metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
