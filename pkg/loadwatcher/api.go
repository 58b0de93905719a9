package loadwatcher

import "github.com/paypal/load-watcher/pkg/watcher"

// PodsQuery asks GET /watcher to include each node's PodUIDs (Berth's scheduler does; upstream
// clients do not, and get a smaller body).
const PodsQuery = "pods"

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
}

// Response is what GET /watcher serves: the upstream document, whose fields stay at the top
// level so github.com/paypal/load-watcher clients decode it unchanged, plus Berth's per-node
// freshness under a key they ignore.
type Response struct {
	watcher.WatcherMetrics
	Nodes map[string]NodeStatus `json:"berthNodes,omitempty"`
}
