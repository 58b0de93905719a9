package helm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/pkg/berthctl"
)

// testNodes proves `kubectl berth nodes` on the helm-installed system with the chart's
// berthctl-reader roles only: the load the agent measured on the real node, read through the
// API server's service proxy to the watcher, and the placed-pod estimate read from the leader
// scheduler's pod by port-forward (TokenReview and SubjectAccessReview on the scheduler's own
// port), never recomputed by the client.
func testNodes(ctx context.Context, t *testing.T, c *cluster.Cluster, node string) {
	reader := readerAccount(ctx, t, c, "e2e-berthctl-reader", release+"-berthctl-reader", true, true)
	var view berthctl.NodesView
	var out, errOut string
	var runErr error
	// The bindings reach the scheduler's authorizer within moments; the agent's first report
	// within its interval.
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		out, errOut, runErr = kubectlBerth(ctx, c, reader, "nodes", "-o", "json", "--berth-namespace", ns, "--scheduler-namespace", ns)
		if runErr != nil {
			return false, nil
		}
		view = berthctl.NodesView{}
		if err := json.Unmarshal([]byte(out), &view); err != nil {
			return false, nil
		}
		for _, n := range view.Nodes {
			if n.Name == node && n.Load == berthctl.Fresh && strings.HasPrefix(view.PlacedPodEstimate, "read from ") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("kubectl berth nodes -o json as the berthctl reader: %v (%v)\nstdout:\n%s\nstderr:\n%s", err, runErr, out, errOut)
	}
	t.Logf("placed-pod estimate: %s", view.PlacedPodEstimate)
	if !strings.HasPrefix(view.PlacedPodEstimate, "read from leader pod "+ns+"/") {
		t.Errorf("placed-pod estimate %q, want it read from the leader scheduler's pod in %s", view.PlacedPodEstimate, ns)
	}
	for _, n := range view.Nodes {
		if n.Name != node {
			continue
		}
		if n.CPU.Average == nil || n.CPU.Latest == nil || n.CPU.Allocatable == "" {
			t.Errorf("node %s: measured CPU %+v, want the agent's average and latest beside allocatable", node, n.CPU)
		}
		t.Logf("node %s: load %s, cpu %+v, placed %+v", node, n.Load, n.CPU, n.Placed)
	}
	// The human table: the same run through the same path prints the node and the source.
	table, errOut, err := kubectlBerth(ctx, c, reader, "nodes", "--berth-namespace", ns, "--scheduler-namespace", ns)
	if err != nil || !strings.Contains(table, node) {
		t.Errorf("kubectl berth nodes: %v\nstdout:\n%s\nstderr:\n%s", err, table, errOut)
	}
	t.Logf("kubectl berth nodes:\n%s", table)
}
