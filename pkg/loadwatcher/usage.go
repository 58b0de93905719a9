package loadwatcher

import (
	"math"

	"github.com/paypal/load-watcher/pkg/watcher"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// WindowLoad is one node over one statistics window, each resource as its source measured it.
// The store keeps this typed form; the upstream metric list is written from it when served.
type WindowLoad struct {
	CPU, Memory Usage
}

// Usage is one resource over one window, in percent of the node's capacity; the server keeps
// every value within [0,100]. A pull source may lack any of the three numbers (Prometheus
// without one of the series, metrics-server before a window holds a sample): Has says which
// were measured.
type Usage struct {
	// Latest is the newest sample; Avg and Std the mean and standard deviation of the window's
	// samples (Std in percentage points).
	Latest, Avg, Std float64
	Has              Measured
}

// Measured says which numbers of a Usage a source measured.
type Measured uint8

const (
	HasLatest Measured = 1 << iota
	HasAvg
	HasStd
)

func (w WindowLoad) any() bool { return w.CPU.Has|w.Memory.Has != 0 }

// resource is the typed form's reading (loadapi.ResourceLoad): the window mean, or the newest
// sample while the source has no mean (as upstream's readers take it); nil without either,
// so a resource the source did not measure is absent, never 0 %.
func (u Usage) resource() *loadapi.ResourceLoad {
	r := &loadapi.ResourceLoad{Avg: u.Avg, Std: u.Std}
	switch {
	case u.Has&HasAvg != 0:
	case u.Has&HasLatest != 0:
		r.Avg = u.Latest
	default:
		return nil
	}
	if u.Has&HasStd == 0 {
		r.Std = 0
	}
	return r
}

// appendMetrics writes u as upstream metrics, Latest then AVG then STD: upstream
// TargetLoadPacking takes the last CPU metric whose operator is AVG or Latest, and the
// resource-stats helper takes Latest only when no AVG was seen before it, so with this order
// both read the window average.
func (u Usage) appendMetrics(ms []watcher.Metric, name, typ, window string) []watcher.Metric {
	if u.Has&HasLatest != 0 {
		ms = append(ms, watcher.Metric{Name: name, Type: typ, Operator: watcher.Latest, Value: u.Latest})
	}
	if u.Has&HasAvg != 0 {
		ms = append(ms, watcher.Metric{Name: name, Type: typ, Operator: watcher.Average, Rollup: window, Value: u.Avg})
	}
	if u.Has&HasStd != 0 {
		ms = append(ms, watcher.Metric{Name: name, Type: typ, Operator: watcher.Std, Rollup: window, Value: u.Std})
	}
	return ms
}

// clamp keeps u's measured values within [0,100] % and drops non-finite ones; it returns how
// many it changed or dropped.
func (u *Usage) clamp() int {
	n := 0
	for _, f := range []struct {
		bit Measured
		v   *float64
	}{{HasLatest, &u.Latest}, {HasAvg, &u.Avg}, {HasStd, &u.Std}} {
		switch v := *f.v; {
		case u.Has&f.bit == 0:
		case math.IsNaN(v) || math.IsInf(v, 0):
			n++
			u.Has &^= f.bit
			*f.v = 0
		case v < 0 || v > 100:
			n++
			*f.v = min(max(v, 0), 100)
		}
	}
	return n
}

// WindowsFromReport is an agent report's numbers per window.
func WindowsFromReport(r *Report) map[string]WindowLoad {
	out := make(map[string]WindowLoad, len(r.Windows))
	const all = HasLatest | HasAvg | HasStd
	for _, w := range r.Windows {
		out[w.Window] = WindowLoad{
			CPU:    Usage{Latest: r.Latest.CPU, Avg: w.CPU.Avg, Std: w.CPU.Std, Has: all},
			Memory: Usage{Latest: r.Latest.Memory, Avg: w.Memory.Avg, Std: w.Memory.Std, Has: all},
		}
	}
	return out
}

// metricNames are the upstream metric names a source's numbers are served under.
type metricNames struct{ cpu, memory string }

var defaultMetricNames = map[string]metricNames{
	SourceAgent:         {"berth_node_cpu_utilisation", "berth_node_memory_utilisation"},
	SourceMetricsServer: {"metrics.k8s.io/cpu", "metrics.k8s.io/memory"},
	// The Prometheus source's default series (source.DefaultCPUMetric); SetMetricNames names
	// the ones it was configured with.
	SourcePrometheus: {"berth_node_cpu_utilisation_percent", "berth_node_memory_utilisation_percent"},
}

// SetMetricNames names the upstream metrics the store's numbers are served under (the
// Prometheus source's configured series).
func (s *Store) SetMetricNames(cpu, memory string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names = metricNames{cpu, memory}
	s.gen++
}

// metricsOf is one node's window as the upstream metric list: CPU then memory.
func (n metricNames) metricsOf(wl WindowLoad, window string) []watcher.Metric {
	ms := make([]watcher.Metric, 0, 6)
	ms = wl.CPU.appendMetrics(ms, n.cpu, watcher.CPU, window)
	return wl.Memory.appendMetrics(ms, n.memory, watcher.Memory, window)
}
