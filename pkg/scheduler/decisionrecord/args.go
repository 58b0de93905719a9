package decisionrecord

import (
	"k8s.io/apimachinery/pkg/runtime"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// Summary says where the one-line summary of a placement goes.
type Summary = configv1.Summary

// Summary targets.
const (
	// SummaryNone: the record is only served on the debug endpoint.
	SummaryNone = configv1.SummaryNone
	// SummaryEvent appends the summary to the message of the pod's Scheduled event.
	SummaryEvent = configv1.SummaryEvent
)

// Defaults and bounds.
const (
	DefaultRecords  = configv1.DefaultRecords
	DefaultTopNodes = configv1.DefaultTopNodes
	MaxRecords      = config.MaxRecords
	MaxTopNodes     = config.MaxTopNodes
)

// Args configures decision recording for one profile, defined in api/config/v1 (defaults
// there, validation in pkg/scheduler/apis/config).
type Args = configv1.DecisionRecordArgs

// ParseArgs decodes (strictly), defaults and validates the args exactly as the scheduler does.
// obj may be nil, a *runtime.Unknown holding JSON or YAML, or an *Args; the result has every
// pointer set.
func ParseArgs(obj runtime.Object) (*Args, error) {
	return config.Parse(obj, Name, config.ValidateDecisionRecordArgs)
}
