// Package loadapi is the wire contract of Berth's load pipeline, agent → load watcher →
// scheduler: the report a node agent POSTs and the document GET /watcher serves. It holds types
// and constants only, so the agent and the scheduler plugins depend on the contract, never on
// the watcher's server code (pkg/loadwatcher), and the watcher depends on nothing of theirs.
//
// The /watcher document is github.com/paypal/load-watcher's own type at the top level, which
// keeps upstream clients (Trimaran, api.NewServiceClient) decoding it unchanged.
package loadapi

import "github.com/paypal/load-watcher/pkg/watcher"

// ReportPath is where agents POST their reports and where the scheduler GETs the document (the
// method tells them apart, so a node may be called anything without clashing with a sub-path).
const ReportPath = "/watcher"

// PodsQuery asks GET /watcher to include each node's PodUIDs (Berth's scheduler does; upstream
// clients do not, and get a smaller body).
const PodsQuery = "pods"

// MaxReportBytes bounds a report body; a real one with 250 pod UIDs is under 16 KiB.
const MaxReportBytes = 1 << 20

// DefaultMaxPodUIDs bounds the pod list of a report: far above the kubelet's default of 110 pods
// per node, far below what would make the scheduler's per-node work noticeable.
const DefaultMaxPodUIDs = 1000

// WindowNames are the windows a report may carry, as load-watcher names them.
var WindowNames = []string{"5m", "10m", "15m"}

// ResourceStats is one resource over one window, in percent of the node's capacity.
type ResourceStats struct {
	Avg float64 `json:"avg"`
	Std float64 `json:"std"`
	P95 float64 `json:"p95"`
}

// WindowReport is one statistics window of a report.
type WindowReport struct {
	// Window is a load-watcher window name: "5m", "10m" or "15m".
	Window  string        `json:"window"`
	Samples int           `json:"samples"`
	CPU     ResourceStats `json:"cpu"`
	Memory  ResourceStats `json:"memory"`
}

// Latest is the newest single sample, in percent.
type Latest struct {
	CPU    float64 `json:"cpu"`
	Memory float64 `json:"memory"`
}

// Report is what a node agent POSTs to ReportPath, authenticated with its service account token.
type Report struct {
	Node string `json:"node"`
	// Time is the Unix time (seconds) of the newest sample behind the numbers, not of the push:
	// an agent whose sampling stalled must age into "stale" at the watcher.
	Time    int64          `json:"time"`
	Latest  Latest         `json:"latest"`
	Windows []WindowReport `json:"windows"`
	PodUIDs []string       `json:"podUIDs"`
	// Pods is the measured use of the pods in PodUIDs the agent could read (a pod whose cgroup
	// was gone or unreadable is in PodUIDs and not here). Optional: an agent or watcher without
	// per-pod data leaves it out, and readers fall back to time-based rules.
	Pods []PodUsage `json:"pods,omitempty"`
	// Instance names one run of the agent process (random at start) and Seq numbers its reports
	// from 1. The watcher orders reports by them and by its own receive time, never by Time, so
	// an agent whose clock was ahead cannot shadow the reports that follow. Both are optional
	// (a report without them is ordered by receive time alone).
	Instance string `json:"instance,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
}

// MaxInstanceLen bounds Report.Instance.
const MaxInstanceLen = 64

// Metrics is the upstream document GET /watcher returns.
type Metrics = watcher.WatcherMetrics

// NodeStatus is Berth's per-node extension of the load-watcher document.
type NodeStatus struct {
	// Updated is the Unix time (seconds) of the newest sample behind this node's numbers.
	Updated int64 `json:"updated"`
	// Stale is set when Updated is older than the watcher's staleness limit. A stale node's
	// metrics are left out of data.NodeMetricsMap: it is reported as unknown, never as idle.
	Stale bool `json:"stale,omitempty"`
	// PodUIDs are the pods the node agent saw running when it sampled (only with ?pods=true),
	// so the scheduler can tell which pods it just bound the numbers do not include yet.
	PodUIDs []string `json:"podUIDs,omitempty"`
	// Pods is the per-pod use the agent reported with PodUIDs (only with ?pods=true).
	Pods []PodUsage `json:"pods,omitempty"`
}

// MaxPods bounds Report.Pods like DefaultMaxPodUIDs bounds PodUIDs.
const MaxPods = DefaultMaxPodUIDs

// PodUsage is one pod's measured use, in the node's units: percent of the node's capacity, so
// a pod's numbers subtract directly from its node's.
type PodUsage struct {
	UID string `json:"uid"`
	// Latest is the pod's share in the node's newest sample.
	Latest Latest `json:"latest"`
	// Windows are the pod's averages over the node's windows (same names as Report.Windows).
	// Why averaged over every sample of the node's window, counting 0 before the pod was first
	// seen: the number is then exactly what the node's window average already holds of this
	// pod, which is what an estimate for a just-placed pod must not count again.
	Windows []PodWindow `json:"windows,omitempty"`
	// CPUMillicores and MemoryBytes are the latest sample in absolute units, for consumers that
	// compare a pod against another node's capacity (hot-spot relief).
	CPUMillicores int64 `json:"cpuMillicores,omitempty"`
	MemoryBytes   int64 `json:"memoryBytes,omitempty"`
}

// PodWindow is one pod's average over one of the node's windows, in percent of node capacity.
type PodWindow struct {
	Window string  `json:"window"`
	CPU    float64 `json:"cpu"`
	Memory float64 `json:"memory"`
}

// Response is what GET /watcher serves: the upstream document, whose fields stay at the top
// level so github.com/paypal/load-watcher clients decode it unchanged, plus Berth's per-node
// freshness under a key they ignore.
type Response struct {
	watcher.WatcherMetrics
	Nodes map[string]NodeStatus `json:"berthNodes,omitempty"`
}
