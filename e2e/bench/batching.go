package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/berth-sched/berth/e2e/cluster"
)

// batchedCycles reads from a running scheduler's /metrics how many scheduling cycles used the
// framework's opportunistic-batching hint (scheduler_batch_attempts_total{result="hint_used"}),
// summed over profiles: the share of pods that skipped Filter and Score on every node. A
// profile with one Filter or Score plugin that cannot sign pods never batches.
func batchedCycles(ctx context.Context, c *cluster.Cluster, port int) (int, error) {
	client, err := schedulerClient(c)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("GET /metrics: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return hintUsed(resp.Body)
}

// hintUsed sums the hint_used samples of scheduler_batch_attempts_total in a Prometheus text
// exposition; no such sample is zero (the series appear only once a hint was used).
func hintUsed(r io.Reader) (int, error) {
	const metric = "scheduler_batch_attempts_total{"
	var n float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric) || !strings.Contains(line, `result="hint_used"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		n += v
	}
	return int(n), sc.Err()
}

// noDefaultSpread turns off PodTopologySpread's system default constraints. With them (the
// upstream default) the plugin refuses to sign every pod, so the framework's opportunistic
// batching never runs whatever the other plugins do; the "no default spread" profiles show
// what batching gives when a cluster opts out, and that Berth's plugins keep it working.
const noDefaultSpread = "  - name: PodTopologySpread\n    args:\n      defaultingType: List\n"

func init() {
	RegisterProfile(NoDefaultSpreadProfile)
	RegisterProfile(LoadAwareNoDefaultSpreadProfile)
}

// NoDefaultSpreadProfile is berth-scheduler's default plugins without PodTopologySpread's
// default constraints.
func NoDefaultSpreadProfile() Profile {
	p := BerthDefaultProfile()
	p.Name = "berth-scheduler (default plugins, no default spread)"
	p.Profiles += "  pluginConfig:\n" + noDefaultSpread
	return p
}

// LoadAwareNoDefaultSpreadProfile is LoadAwareProfile without PodTopologySpread's default
// constraints.
func LoadAwareNoDefaultSpreadProfile() Profile {
	p, addr, _ := syntheticLoadProfile() // a missing port is reported by p.Setup
	p.Name = "berth-scheduler (TargetLoadPacking + LoadVariationRiskBalancing, no default spread)"
	p.Profiles = "- schedulerName: " + SchedulerName + "\n" + loadAwarePlugins(addr, "", noDefaultSpread)
	return p
}
