// Package loadwatcher serves node load in the github.com/paypal/load-watcher API, so that
// upstream Trimaran configurations and clients work against Berth unchanged. Its wire types are
// that module's own, which proves compatibility by construction.
package loadwatcher

import "github.com/paypal/load-watcher/pkg/watcher"

// Metrics is the document GET /watcher returns.
type Metrics = watcher.WatcherMetrics
