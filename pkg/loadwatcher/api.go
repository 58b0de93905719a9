package loadwatcher

import "github.com/berth-sched/berth/pkg/loadapi"

// The wire contract lives in pkg/loadapi, which the agent and the scheduler import without
// linking this server; these aliases keep the server's own code short.
type (
	NodeStatus    = loadapi.NodeStatus
	Response      = loadapi.Response
	Report        = loadapi.Report
	WindowReport  = loadapi.WindowReport
	ResourceStats = loadapi.ResourceStats
	Latest        = loadapi.Latest
)

// Contract constants, re-exported for the server's code.
const (
	PodsQuery         = loadapi.PodsQuery
	ReportPath        = loadapi.ReportPath
	MaxReportBytes    = loadapi.MaxReportBytes
	DefaultMaxPodUIDs = loadapi.DefaultMaxPodUIDs
)

// WindowNames are the windows a report may carry (loadapi.WindowNames).
var WindowNames = loadapi.WindowNames
