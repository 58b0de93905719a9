// Package source holds the pull sources of the load watcher: Prometheus and metrics-server.
package source

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/berth-sched/berth/pkg/loadwatcher"
	"github.com/paypal/load-watcher/pkg/watcher"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/klog/v2"
)

// Prometheus reads node load from a Prometheus server. By default it reads the agent's own
// gauges; with CPUMetric/MemoryMetric set to kube-prometheus recording rules
// (instance:node_cpu:ratio, Scale 100, NodeLabel "instance") it reads what upstream
// load-watcher reads.
type Prometheus struct {
	API          promv1.API
	CPUMetric    string
	MemoryMetric string
	// NodeLabel is the label holding the node name.
	NodeLabel string
	// Scale turns the metric into percent (1 for the agent's percent gauges, 100 for ratios).
	Scale float64
}

// Defaults for the agent's gauges.
const (
	DefaultCPUMetric    = "berth_node_cpu_utilisation_percent"
	DefaultMemoryMetric = "berth_node_memory_utilisation_percent"
	DefaultNodeLabel    = "node"
)

// NewPrometheus connects to url (no request is made yet).
func NewPrometheus(url string) (*Prometheus, error) {
	c, err := promapi.NewClient(promapi.Config{Address: url})
	if err != nil {
		return nil, err
	}
	return &Prometheus{API: promv1.NewAPI(c), CPUMetric: DefaultCPUMetric, MemoryMetric: DefaultMemoryMetric,
		NodeLabel: DefaultNodeLabel, Scale: 1}, nil
}

type promResource struct {
	typ, metric string
}

// Poll implements loadwatcher.Poller.
func (p *Prometheus) Poll(ctx context.Context, now time.Time) (map[string]loadwatcher.NodeLoad, error) {
	// Per-node freshness: the newest sample of the CPU series. A node whose agent or exporter
	// stopped drops out of the instant vector after Prometheus's 5-minute lookback, and keeps its
	// older entry in the store, which then turns stale.
	updated, err := p.vector(ctx, fmt.Sprintf("max by (%s) (timestamp(%s))", p.NodeLabel, p.CPUMetric), now)
	if err != nil {
		return nil, err
	}
	out := make(map[string]loadwatcher.NodeLoad, len(updated))
	for node, ts := range updated {
		sec, frac := math.Modf(ts)
		out[node] = loadwatcher.NodeLoad{Updated: time.Unix(int64(sec), int64(frac*1e9)), Windows: map[string]loadwatcher.WindowLoad{}}
	}
	for _, res := range []promResource{{watcher.CPU, p.CPUMetric}, {watcher.Memory, p.MemoryMetric}} {
		latest, err := p.vector(ctx, fmt.Sprintf("avg by (%s) (%s)", p.NodeLabel, res.metric), now)
		if err != nil {
			return nil, err
		}
		for _, w := range loadwatcher.WindowNames {
			avg, err := p.vector(ctx, fmt.Sprintf("avg by (%s) (avg_over_time(%s[%s]))", p.NodeLabel, res.metric, w), now)
			if err != nil {
				return nil, err
			}
			std, err := p.vector(ctx, fmt.Sprintf("avg by (%s) (stddev_over_time(%s[%s]))", p.NodeLabel, res.metric, w), now)
			if err != nil {
				return nil, err
			}
			for node, l := range out {
				wl := l.Windows[w]
				u := &wl.CPU
				if res.typ == watcher.Memory {
					u = &wl.Memory
				}
				if v, ok := p.pct(latest, node); ok {
					u.Latest, u.Has = v, u.Has|loadwatcher.HasLatest
				}
				if v, ok := p.pct(avg, node); ok {
					u.Avg, u.Has = v, u.Has|loadwatcher.HasAvg
				}
				if v, ok := p.pct(std, node); ok {
					u.Std, u.Has = v, u.Has|loadwatcher.HasStd
				}
				l.Windows[w] = wl
			}
		}
	}
	return out, nil
}

// pct scales a value to percent. Values outside [0,100] are passed on: the server clamps and
// counts them (berth_loadwatcher_values_out_of_range_total), so a wrong Scale or a broken exporter
// shows up in a metric. Non-finite values are dropped here (JSON cannot carry them).
func (p *Prometheus) pct(vals map[string]float64, node string) (float64, bool) {
	v, ok := vals[node]
	if !ok {
		return 0, false
	}
	v *= p.Scale
	if math.IsNaN(v) || math.IsInf(v, 0) {
		klog.V(2).InfoS("Ignoring a non-finite Prometheus value", "node", node, "value", v)
		return 0, false
	}
	return v, true
}

func (p *Prometheus) vector(ctx context.Context, q string, now time.Time) (map[string]float64, error) {
	val, warnings, err := p.API.Query(ctx, q, now, promv1.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("prometheus query %q: %w", q, err)
	}
	if len(warnings) > 0 {
		klog.V(2).InfoS("Prometheus warnings", "query", q, "warnings", warnings)
	}
	vec, ok := val.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("prometheus query %q: got %s, want a vector", q, val.Type())
	}
	out := make(map[string]float64, len(vec))
	for _, s := range vec {
		node := string(s.Metric[model.LabelName(p.NodeLabel)])
		if node == "" {
			continue
		}
		out[node] = float64(s.Value)
	}
	return out, nil
}
