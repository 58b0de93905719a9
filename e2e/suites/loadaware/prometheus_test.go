package loadaware

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
)

// TestPrometheusSource runs a real Prometheus (Debian's package) scraping two real agents'
// /metrics on loopback, and reads the nodes' utilisation back through berth-loadwatcher's
// prometheus source.
func TestPrometheusSource(t *testing.T) {
	// A missing prometheus is a failure (this test is the only proof the prometheus source
	// works against the real thing), except under an explicit BERTH_SKIP_REAL_NODE=1.
	promBin := framework.NeedHostTool(t, "prometheus", "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := shared
	nodes := []stack.NodeLoad{{Name: "prom-node-a", CPU: 25, Memory: 60}, {Name: "prom-node-b", CPU: 50, Memory: 30}}
	for _, n := range nodes {
		if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: "8", Memory: "16Gi"}); err != nil {
			t.Fatal(err)
		}
	}
	// The agents must push somewhere; with the prometheus source nobody reads the pushes.
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer sink.Close()
	dir := t.TempDir()
	var targets []string
	for _, n := range nodes {
		a, err := stack.StartAgent(ctx, c, stack.AgentOptions{Name: "prom-agent-" + n.Name, Load: n, Dir: dir,
			WatcherURL: sink.URL, SampleInterval: 200 * time.Millisecond, ReportInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Stop(c) })
		targets = append(targets, strconv.Quote(a.Addr))
	}

	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	promURL := "http://127.0.0.1:" + strconv.Itoa(port)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: berth-agent
    static_configs:
      - targets: [%s]
`, strings.Join(targets, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	prom, err := c.StartComponent(ctx, cluster.ProcessSpec{Name: "prometheus", Binary: promBin, Args: []string{
		"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(port),
	}}, cluster.HTTPCheck(promURL+"/-/ready"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopComponent(prom) })

	kc, err := stack.WatcherKubeconfig(ctx, c, "prom-loadwatcher", stack.AgentNamespace)
	if err != nil {
		t.Fatal(err)
	}
	w, err := stack.StartWatcher(ctx, c, "prom-loadwatcher", kc,
		"--source=prometheus", "--prometheus-url="+promURL, "--poll-interval=1s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopComponent(w.Process) })

	names := []string{nodes[0].Name, nodes[1].Name}
	// A few scrapes plus a poll: the first polls may find no series yet.
	r, err := stack.WaitFresh(ctx, w.URL, names, 90*time.Second)
	if err != nil {
		t.Fatalf("%v\nprometheus log:\n%s\nwatcher log:\n%s", err, prom.Tail(20), w.Tail(20))
	}
	if r.Source == "" {
		t.Errorf("/watcher names no source")
	}
	for _, n := range nodes {
		cpu, _ := stack.CPU(r, n.Name)
		// The fixture holds the load exactly, so every scraped sample is the configured value.
		if math.Abs(cpu-n.CPU) > 0.5 {
			t.Errorf("node %s: CPU %.2f %% through prometheus, want %.0f %%", n.Name, cpu, n.CPU)
		}
		var mem float64
		var found bool
		for _, m := range r.Data.NodeMetricsMap[n.Name].Metrics {
			if m.Type == "Memory" && (m.Operator == "AVG" || m.Operator == "Latest") {
				mem, found = m.Value, true
			}
		}
		if !found || math.Abs(mem-n.Memory) > 0.5 {
			t.Errorf("node %s: memory %.2f %% (found %v) through prometheus, want %.0f %%", n.Name, mem, found, n.Memory)
		}
	}
}
