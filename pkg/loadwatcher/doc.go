// Package loadwatcher serves node load in the github.com/paypal/load-watcher API, so that
// upstream Trimaran configurations and clients work against Berth unchanged. The wire types are
// in pkg/loadapi (the /watcher document embeds that module's own type, which proves
// compatibility by construction); this package is the server: store, validation, HTTP.
package loadwatcher

import "github.com/berth-sched/berth/pkg/loadapi"

// Metrics is the document GET /watcher returns.
type Metrics = loadapi.Metrics
