package source

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/berth-sched/berth/pkg/loadwatcher"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// Capacity returns a node's CPU (millicores) and memory (bytes) capacity.
type Capacity func(node string) (cpuMilli, memBytes int64, ok bool)

// MetricsServer reads metrics.k8s.io NodeMetrics. metrics-server itself only serves the latest
// value, so the source keeps its own samples (one per metrics-server scrape, deduplicated by
// timestamp) to serve AVG and STD over the windows as well as Latest.
type MetricsServer struct {
	Client   metricsclient.Interface
	Capacity Capacity

	mu      sync.Mutex
	samples map[string][]msSample
}

type msSample struct {
	t        time.Time
	cpu, mem float64
}

const longestWindow = 15 * time.Minute

// Poll implements loadwatcher.Poller.
func (m *MetricsServer) Poll(ctx context.Context, now time.Time) (map[string]loadwatcher.NodeLoad, error) {
	list, err := m.Client.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.samples == nil {
		m.samples = map[string][]msSample{}
	}
	seen := make(map[string]bool, len(list.Items))
	for _, nm := range list.Items {
		// Percent of capacity, as upstream load-watcher computes it, so numbers are comparable.
		cpuCap, memCap, ok := m.Capacity(nm.Name)
		if !ok || cpuCap <= 0 || memCap <= 0 {
			continue
		}
		seen[nm.Name] = true
		// Not clamped here: usage above capacity is passed on, and the server clamps and counts
		// it (berth_loadwatcher_values_out_of_range_total).
		s := msSample{t: nm.Timestamp.Time,
			cpu: 100 * float64(nm.Usage.Cpu().MilliValue()) / float64(cpuCap),
			mem: 100 * float64(nm.Usage.Memory().Value()) / float64(memCap)}
		h := m.samples[nm.Name]
		if n := len(h); n == 0 || s.t.After(h[n-1].t) {
			h = append(h, s)
		}
		m.samples[nm.Name] = h
	}
	out := make(map[string]loadwatcher.NodeLoad, len(seen))
	for node, h := range m.samples {
		// Drop history older than the longest window; drop nodes metrics-server no longer has
		// (their store entry turns stale on its own).
		i := 0
		for i < len(h) && now.Sub(h[i].t) > longestWindow {
			i++
		}
		h = h[i:]
		if len(h) == 0 {
			delete(m.samples, node)
			continue
		}
		m.samples[node] = h
		if !seen[node] {
			continue
		}
		last := h[len(h)-1]
		l := loadwatcher.NodeLoad{Updated: last.t, Windows: map[string]loadwatcher.WindowLoad{}}
		for _, w := range loadwatcher.WindowNames {
			d, _ := time.ParseDuration(w)
			var cpu, mem []float64
			for _, s := range h {
				if now.Sub(s.t) <= d {
					cpu = append(cpu, s.cpu)
					mem = append(mem, s.mem)
				}
			}
			l.Windows[w] = loadwatcher.WindowLoad{CPU: usageOf(last.cpu, cpu), Memory: usageOf(last.mem, mem)}
		}
		out[node] = l
	}
	return out, nil
}

// usageOf is one resource over one window: the newest sample, and the window's mean and
// deviation when the window holds any sample.
func usageOf(latest float64, window []float64) loadwatcher.Usage {
	u := loadwatcher.Usage{Latest: latest, Has: loadwatcher.HasLatest}
	if len(window) > 0 {
		u.Avg, u.Std = avgStd(window)
		u.Has |= loadwatcher.HasAvg | loadwatcher.HasStd
	}
	return u
}

func avgStd(v []float64) (float64, float64) {
	var sum float64
	for _, x := range v {
		sum += x
	}
	a := sum / float64(len(v))
	var sq float64
	for _, x := range v {
		sq += (x - a) * (x - a)
	}
	return a, math.Sqrt(sq / float64(len(v)))
}
