package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/pkg/loadwatcher"
)

func init() { RegisterProfile(LoadAwareProfile) }

// LoadAwareProfile is berth-scheduler with the default plugins plus TargetLoadPacking and
// LoadVariationRiskBalancing at every extension point they implement (Reserve included).
//
// Bench clusters have no KWOK and no agents, so Setup serves the load instead: Berth's own
// load watcher HTTP server (pkg/loadwatcher, in this process, on loopback) with a store filled
// with synthetic but realistic per-node metrics — CPU 10–70 %, memory 20–80 %, deviation
// 2–12 %, fixed per node name — kept fresh while the benchmark runs. The scheduler polls it
// like a real watcher, so the measured cost includes fetching and decoding the document.
func LoadAwareProfile() Profile {
	p, addr, err := syntheticLoadProfile()
	p.Name = "berth-scheduler (TargetLoadPacking + LoadVariationRiskBalancing)"
	p.Profiles = "- schedulerName: " + SchedulerName + "\n" + loadAwarePlugins(addr, "")
	_ = err // reported by Setup
	return p
}

// syntheticLoadProfile reserves the synthetic watcher's address (it goes into the scheduler
// configuration before Setup runs) and returns a profile whose Setup serves it.
func syntheticLoadProfile() (Profile, string, error) {
	port, err := cluster.FreePort()
	if err != nil {
		port = 0 // Setup reports the problem
	}
	addr := "http://127.0.0.1:" + strconv.Itoa(port)
	return Profile{
		Binary: cluster.BerthScheduler,
		Setup: func(ctx context.Context, c *cluster.Cluster) error {
			if port == 0 {
				return fmt.Errorf("no free port for the synthetic load watcher: %v", err)
			}
			return serveSyntheticLoad(ctx, c, "127.0.0.1:"+strconv.Itoa(port))
		},
	}, addr, err
}

// loadAwarePlugins is a profile's plugins and pluginConfig (under the schedulerName line):
// TargetLoadPacking and LoadVariationRiskBalancing at every extension point they implement,
// reading the watcher at addr, plus extraPoints (more extension-point entries, indented as
// under "plugins:") and extraConfig (more pluginConfig entries).
func loadAwarePlugins(addr string, extra ...string) string {
	args := fmt.Sprintf("      watcherAddress: %s\n      refreshIntervalSeconds: 5\n", addr)
	points, config := "", ""
	if len(extra) > 0 {
		points = extra[0]
	}
	if len(extra) > 1 {
		config = extra[1]
	}
	return "  plugins:\n    multiPoint:\n      enabled:\n      - name: TargetLoadPacking\n      - name: LoadVariationRiskBalancing\n" + points +
		"  pluginConfig:\n  - name: TargetLoadPacking\n    args:\n" + args +
		"  - name: LoadVariationRiskBalancing\n    args:\n" + args + config
}

// serveSyntheticLoad serves every node of the cluster through pkg/loadwatcher's server until
// ctx ends, refreshing the samples so they never expire.
func serveSyntheticLoad(ctx context.Context, c *cluster.Cluster, addr string) error {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	store := loadwatcher.NewStore(loadwatcher.SourceAgent, 5*time.Minute)
	fill := func() {
		now := time.Now()
		for _, n := range nodes.Items {
			r := syntheticReport(n.Name, now)
			store.Put(n.Name, loadwatcher.NodeLoad{Updated: now, Windows: loadwatcher.WindowsFromReport(&r)})
		}
	}
	for _, n := range nodes.Items {
		store.SetKnown(n.Name, true)
	}
	fill()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("synthetic load watcher: %w", err)
	}
	hs := &http.Server{Handler: loadwatcher.NewServer(store).Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				_ = hs.Close()
				return
			case <-t.C:
				fill()
			}
		}
	}()
	return nil
}

// syntheticReport is a node's load, fixed by a hash of its name so runs are comparable.
func syntheticReport(node string, now time.Time) loadwatcher.Report {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	v := h.Sum32()
	cpu := 10 + float64(v%6000)/100        // 10–70 %
	mem := 20 + float64((v/6000)%6000)/100 // 20–80 %
	std := 2 + float64((v/36000000)%1000)/100
	r := loadwatcher.Report{Node: node, Time: now.Unix(), Latest: loadwatcher.Latest{CPU: cpu, Memory: mem}}
	for _, w := range loadwatcher.WindowNames {
		r.Windows = append(r.Windows, loadwatcher.WindowReport{Window: w, Samples: 300,
			CPU:    loadwatcher.ResourceStats{Avg: cpu, Std: std, P95: cpu + 2*std},
			Memory: loadwatcher.ResourceStats{Avg: mem, Std: std / 2, P95: mem + std}})
	}
	return r
}
