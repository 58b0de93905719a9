// Package loadaware tests real-load-aware scheduling against the real control plane: the
// load watcher's TokenReview-based agent identity, a real Prometheus scraping real agents, and
// berth-agent → berth-loadwatcher → berth-scheduler (TargetLoadPacking) end to end, every
// Berth component as its own process.
package loadaware

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
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

func TestMain(m *testing.M) {
	// Everything the suite and its processes put in the temporary directory must be gone after
	// teardown (cluster directory, schedulers' default configurations, fixture /proc writers).
	tempCheck := framework.IsolateTemp()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	c, err := cluster.Start(ctx, cluster.Config{
		// Pods here are either bound directly (agent pods) or by berth-scheduler: the stock
		// scheduler is not needed (the controller-manager is: default service accounts and
		// lifting the not-ready taint off KWOK nodes).
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
