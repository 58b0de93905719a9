package rebalancer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// maxBody caps a watcher answer, as the scheduler's plugins do: a broken watcher must not make
// the operator buffer unbounded memory.
const maxBody = 64 << 20

// Usage is a utilisation in percent of a node's capacity.
type Usage struct{ CPU, Memory float64 }

// NodeLoad is one node's entry of the watcher document, on the operator's clock.
type NodeLoad struct {
	Usage Usage
	// HasCPU and HasMemory say which resources the watcher served; HasMetrics either.
	HasCPU, HasMemory, HasMetrics bool
	// Invalid: a value was not finite or outside [0,100]: the node is unknown, never clamped
	// into looking idle or hot.
	Invalid bool
	Stale   bool
	Updated time.Time
	// Pods is the per-pod use the agent measured (nil when the watcher sent none).
	Pods map[string]loadapi.PodUsage
}

// Load is one parsed watcher answer.
type Load struct {
	Fetched time.Time
	// Newest is the newest fresh sample of any node: an old one means the whole signal is dead.
	Newest time.Time
	Nodes  map[string]*NodeLoad
	// InvalidValues counts values the document held out of range or not finite.
	InvalidValues int
}

// FetchError classifies a failed fetch for the metric and the status.
type FetchError struct {
	Kind string // transport, http_status, decode, empty
	Err  error
}

func (e *FetchError) Error() string { return e.Kind + ": " + e.Err.Error() }
func (e *FetchError) Unwrap() error { return e.Err }

// Fetch GETs base/watcher?pods=true and parses it.
func Fetch(ctx context.Context, hc *http.Client, base string, now func() time.Time) (*Load, error) {
	url := base + loadapi.ReportPath + "?" + loadapi.PodsQuery + "=true"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, &FetchError{"transport", err}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &FetchError{"transport", err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &FetchError{"http_status", fmt.Errorf("GET %s: status %d%s", url, resp.StatusCode, loadapi.RefusalDetail(resp))}
	}
	var doc loadapi.Response
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&doc); err != nil {
		return nil, &FetchError{"decode", fmt.Errorf("GET %s: %w", url, err)}
	}
	var serverNow time.Time
	if d := resp.Header.Get("Date"); d != "" {
		if t, err := http.ParseTime(d); err == nil {
			serverNow = t
		}
	}
	return Parse(&doc, now(), serverNow)
}

// Parse digests a watcher document fetched at fetched (the operator's clock); serverNow is the
// watcher's clock at that moment (zero when unknown), so sample times are rebased and clock skew
// between the machines does not make fresh data look expired.
func Parse(doc *loadapi.Response, fetched, serverNow time.Time) (*Load, error) {
	if doc.Timestamp == 0 && doc.Window.End == 0 && len(doc.Data.NodeMetricsMap) == 0 && len(doc.Nodes) == 0 {
		return nil, &FetchError{"empty", fmt.Errorf("document has no timestamp and no nodes")}
	}
	toLocal := func(unix int64) time.Time {
		t := time.Unix(unix, 0)
		if serverNow.IsZero() {
			return t
		}
		return fetched.Add(-serverNow.Sub(t))
	}
	docTime := doc.Timestamp
	if docTime == 0 {
		docTime = doc.Window.End
	}
	l := &Load{Fetched: fetched, Nodes: map[string]*NodeLoad{}}
	get := func(name string) *NodeLoad {
		n := l.Nodes[name]
		if n == nil {
			n = &NodeLoad{Updated: toLocal(docTime)}
			l.Nodes[name] = n
		}
		return n
	}
	for name, nm := range doc.Data.NodeMetricsMap {
		n := get(name)
		u, bad := digest(nm.Metrics)
		n.Usage, n.HasCPU, n.HasMemory, n.HasMetrics = u.usage, u.cpu, u.memory, u.cpu || u.memory
		if bad > 0 {
			n.Invalid = true
			l.InvalidValues += bad
		}
	}
	for name, st := range doc.Nodes {
		n := get(name)
		if st.Updated != 0 {
			n.Updated = toLocal(st.Updated)
		}
		n.Stale = st.Stale
		if len(st.Pods) > 0 {
			n.Pods = make(map[string]loadapi.PodUsage, len(st.Pods))
			for _, p := range st.Pods {
				if !valid(p.Latest.CPU) || !valid(p.Latest.Memory) || p.CPUMillicores < 0 || p.MemoryBytes < 0 {
					l.InvalidValues++
					continue // that pod falls back to its requests
				}
				n.Pods[p.UID] = p
			}
		}
	}
	for _, n := range l.Nodes {
		if n.HasMetrics && !n.Invalid && !n.Stale && n.Updated.After(l.Newest) {
			l.Newest = n.Updated
		}
	}
	return l, nil
}

func valid(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= 100 }

type digested struct {
	usage       Usage
	cpu, memory bool
}

// digest reads a node's utilisation: the Latest sample when the watcher serves one (a move shows
// in it within a sample, where a 5-minute average would make the next rounds move more pods for
// load that is already gone), else the average.
func digest(ms []watcher.Metric) (d digested, bad int) {
	var cpuAvg, memAvg float64
	var cpuLatest, memLatest, cpuAvgSeen, memAvgSeen bool
	for _, m := range ms {
		if m.Type != watcher.CPU && m.Type != watcher.Memory {
			continue
		}
		if m.Operator != watcher.Latest && m.Operator != watcher.Average && m.Operator != "" {
			continue
		}
		if !valid(m.Value) {
			bad++
			continue
		}
		latest := m.Operator == watcher.Latest || m.Operator == ""
		switch {
		case m.Type == watcher.CPU && latest:
			d.usage.CPU, cpuLatest, d.cpu = m.Value, true, true
		case m.Type == watcher.CPU:
			cpuAvg, cpuAvgSeen, d.cpu = m.Value, true, true
		case latest:
			d.usage.Memory, memLatest, d.memory = m.Value, true, true
		default:
			memAvg, memAvgSeen, d.memory = m.Value, true, true
		}
	}
	if !cpuLatest && cpuAvgSeen {
		d.usage.CPU = cpuAvg
	}
	if !memLatest && memAvgSeen {
		d.usage.Memory = memAvg
	}
	return d, bad
}
