package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// podConfigPanel is the dashboard panel whose query needs a real node's attachments.
const podConfigPanel = "PodConfig attachments by state"

// testPodConfigPanel: the real Prometheus, inside the real node's network namespace (where the
// host-network agent pod listens), scrapes the helm-installed agent as the chart's agent
// ServiceMonitor says (plain HTTP /metrics on port 9101), and the dashboard's PodConfig panel
// query returns the node's Configured attachments: at least want of them.
func testPodConfigPanel(ctx context.Context, t *testing.T, c *cluster.Cluster, rn *cluster.RealNode, want int) {
	t.Helper()
	promBin := framework.NeedHostTool(t, "prometheus", "prometheus")
	nsenter := framework.NeedHostTool(t, "nsenter", "util-linux")
	expr := panelQuery(t, podConfigPanel)
	dir, err := os.MkdirTemp(c.Dir, "prometheus-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: %s-agent-metrics
    scheme: http
    metrics_path: /metrics
    static_configs: [{targets: [%q]}]
`, release, net.JoinHostPort(rn.IP, "9101"))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Its own port inside the node's namespace; the test reaches it by dialing in there.
	const listen = "127.0.0.1:19090"
	prom := &framework.Prometheus{URL: "http://" + listen, Client: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: rn.DialContext}}}
	p, err := c.StartComponent(ctx, cluster.ProcessSpec{Name: "prometheus-podconfig", Binary: nsenter, Args: []string{
		"--net=" + rn.NetNS, "--", promBin, "--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--web.listen-address=" + listen,
	}}, func(ctx context.Context) error {
		_, err := prom.Query(ctx, "up")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.StopComponent(p)
	var got []framework.Sample
	// The agent counts attachments by state at each sweep (podconfig resync, 30 s by default).
	err = framework.Poll(ctx, 90*time.Second, func() (bool, string) {
		got, err = prom.Query(ctx, expr)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range got {
			if s.Metric["state"] == "Configured" && s.Value >= float64(want) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%v", got)
	})
	if err != nil {
		t.Fatalf("panel %q: %s: %v\nprometheus targets: %s\nprometheus log:\n%s", podConfigPanel, expr, err, prom.Targets(ctx), p.Tail(20))
	}
	t.Logf("panel %q: %s = %v", podConfigPanel, expr, got)
}

// panelQuery returns the one query of the dashboard panel titled title, from the chart's file.
func panelQuery(t *testing.T, title string) string {
	t.Helper()
	root, err := chart.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "charts", "berth", "files", "dashboards", "berth.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		if p.Title == title && len(p.Targets) == 1 && !strings.Contains(p.Targets[0].Expr, "$") {
			return p.Targets[0].Expr
		}
	}
	t.Fatalf("the dashboard has no panel %q with one variable-free query", title)
	return ""
}
