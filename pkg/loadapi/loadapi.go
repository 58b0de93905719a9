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

// LoadMediaType is Berth's typed form of GET /watcher (Load). Berth's scheduler names it first in
// Accept; a watcher that serves it answers with this Content-Type. Any other answer is the
// upstream document (Response): an upstream watcher, or a Berth watcher older than this form,
// ignores the Accept header, and the client reads the metric list instead. Why a media type
// rather than a path: the auth, the query (window, pods), the ETag and the gzip of GET /watcher
// apply unchanged, and a client learns from one answer which form it got.
const LoadMediaType = "application/vnd.berth.load.v1+json"

// Load is GET /watcher in LoadMediaType: each node's load as named, typed fields, where the
// upstream document (Response) has a list of {type, operator, value} metrics its readers must
// interpret. The query is the same: ?window= picks the window of every Avg and Std (default
// 15m), ?pods=true adds PodUIDs and Pods.
type Load struct {
	// Timestamp is the Unix time (seconds) the watcher built the document: its last store
	// change or staleness transition, not the request.
	Timestamp int64 `json:"timestamp"`
	// Window is the length of the statistics window of every Avg and Std: "5m", "10m" or "15m".
	Window string `json:"window"`
	// Source is where the numbers come from: BerthAgent, Prometheus or KubernetesMetricsServer.
	Source string `json:"source"`
	// Nodes holds every node the watcher knows: those with numbers, and stale or never-reported
	// ones (Stale set, no CPU or Memory), so a reader tells "unknown" from "idle".
	Nodes map[string]NodeLoad `json:"nodes"`
}

// NodeLoad is one node in Load.
type NodeLoad struct {
	// Updated is the Unix time (seconds) of the newest sample behind the numbers; 0 for a
	// cluster node that never reported.
	Updated int64 `json:"updated"`
	// Stale is set when Updated is older than the watcher's staleness limit (or the node never
	// reported). A stale node has no CPU or Memory.
	Stale bool `json:"stale,omitempty"`
	// CPU and Memory are the node's utilisation over Window; absent when the source has no
	// number for that resource (or the node is stale).
	CPU    *ResourceLoad `json:"cpu,omitempty"`
	Memory *ResourceLoad `json:"memory,omitempty"`
	// PodUIDs and Pods are as in NodeStatus (only with ?pods=true).
	PodUIDs []string   `json:"podUIDs,omitempty"`
	Pods    []PodUsage `json:"pods,omitempty"`
}

// ResourceLoad is one resource of one node over the document's window. Every value is in
// percent of the node's capacity, within [0,100] (the watcher clamps what its sources serve).
type ResourceLoad struct {
	// Avg is the mean of the window's samples. A source without a mean for the window (a pull
	// source that has only the newest sample so far) serves that sample here, which is what
	// upstream's readers take in its place.
	Avg float64 `json:"avg"`
	// Std is the standard deviation of the window's samples, in percentage points; 0 when the
	// source has none.
	Std float64 `json:"std"`
}
