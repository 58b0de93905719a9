package loadaware

import (
	"context"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/stack"
)

// TestSkewedAgentClock: an agent run whose clock was 50 s ahead (within the watcher's allowed
// skew of 1 min) reports 90 % CPU; then the node's real berth-agent, with an honest clock and a
// fixture /proc at 20 %, takes over. The real watcher must serve the honest numbers at the
// agent's next report, never a sample time in the future, and drop none of the honest reports.
// Before ordering by arrival and sequence, the honest reports were dropped as "older" for 50 s.
func TestSkewedAgentClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := shared
	const (
		ns   = "berth-skew"
		sa   = "berth-agent"
		node = "skew-node"
	)
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: node, CPU: "8", Memory: "16Gi"}); err != nil {
		t.Fatal(err)
	}
	if err := stack.EnsureAgentIdentity(ctx, c, ns, sa); err != nil {
		t.Fatal(err)
	}
	kc, err := stack.WatcherKubeconfig(ctx, c, "skew-loadwatcher", ns)
	if err != nil {
		t.Fatal(err)
	}
	w, err := stack.StartWatcher(ctx, c, "skew-loadwatcher", kc, "--source=agent", "--agent-service-account="+ns+"/"+sa, "--stale-after=5m")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopComponent(w.Process) })
	pod, err := stack.AgentPod(ctx, c, ns, sa, "skew-agent", node)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := stack.MintToken(ctx, c, sa, pod)
	if err != nil {
		t.Fatal(err)
	}

	skewed := report(node, 90, 40)
	skewed.Time = time.Now().Add(50 * time.Second).Unix()
	skewed.Instance, skewed.Seq = "skewed-run", 1000
	if status, body := postReport(ctx, t, w.URL, tok, skewed); status != http.StatusNoContent {
		t.Fatalf("report 50 s ahead: %d %s, want accepted (within the 1 min skew)", status, body)
	}
	r, err := stack.GetWatcher(ctx, w.URL)
	if err != nil {
		t.Fatal(err)
	}
	if cpu, ok := stack.CPU(r, node); !ok || cpu != 90 {
		t.Fatalf("after the skewed report: CPU %v (present %v), want 90", cpu, ok)
	}
	if u := r.Nodes[node].Updated; u > time.Now().Unix() {
		t.Fatalf("served sample time %d is in the future (now %d): a future time must be clamped", u, time.Now().Unix())
	}

	honestFrom := time.Now()
	a, err := stack.StartAgent(ctx, c, stack.AgentOptions{Name: "skew-berth-agent", Load: stack.NodeLoad{Name: node, CPU: 20, Memory: 40},
		Dir: filepath.Join(c.Dir, "skew"), WatcherURL: w.URL, Token: tok, SampleInterval: 200 * time.Millisecond, ReportInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(c) })
	// 15 s: well inside the 50 s the skewed report used to shadow the node for.
	var last float64
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := stack.GetWatcher(ctx, w.URL)
		if err != nil {
			return false, nil
		}
		if u := r.Nodes[node].Updated; u > time.Now().Unix() {
			t.Errorf("served sample time %d is in the future", u)
		}
		last, _ = stack.CPU(r, node)
		return math.Abs(last-20) < 1, nil
	}); err != nil {
		t.Fatalf("the honest agent's 20 %% never replaced the skewed 90 %% (last served %v): %v\n%s", last, err, w.Tail(20))
	}
	t.Logf("honest numbers served %s after the honest agent started", time.Since(honestFrom).Round(100*time.Millisecond))
	_, page, err := getText(ctx, http.DefaultClient, w.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := metricLine(page, `berth_loadwatcher_reports_rejected_total{reason="out_of_order"}`); ok && !strings.HasSuffix(l, " 0") {
		t.Errorf("honest reports were dropped as out of order: %s", l)
	}
	if l, ok := metricLine(page, "berth_loadwatcher_reports_future_time_total"); !ok || value(l) < 1 {
		t.Errorf("the future-stamped report was not counted: %q", l)
	}
}

func value(line string) float64 {
	f := strings.Fields(line)
	v, _ := strconv.ParseFloat(f[len(f)-1], 64)
	return v
}
