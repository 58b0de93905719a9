package decisionrecord

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-sched/berth/pkg/scheduler/pluginargs"
)

// Summary says where the one-line summary of a placement goes.
type Summary string

// Summary targets.
const (
	// SummaryNone: the record is only served on the debug endpoint.
	SummaryNone Summary = "None"
	// SummaryEvent appends the summary to the message of the pod's Scheduled event.
	SummaryEvent Summary = "Event"
)

// Defaults and bounds.
const (
	DefaultRecords  = 1000
	DefaultTopNodes = 10
	// MaxRecords bounds the LRU so a typo cannot make the scheduler hold gigabytes (a record
	// with 10 nodes is a few KiB).
	MaxRecords  = 1_000_000
	MaxTopNodes = 1000
)

// Args configures decision recording for one profile.
type Args struct {
	metav1.TypeMeta `json:",inline"`

	// Records is how many pods' latest decisions this profile keeps (LRU by last attempt).
	// Default 1000.
	Records *int32 `json:"records,omitempty"`
	// TopNodes is how many nodes a record keeps in detail: the best-scored feasible nodes
	// (chosen first) and the first refused nodes by name; the rest are counted. Default 10.
	TopNodes *int32 `json:"topNodes,omitempty"`
	// Summary is None (default) or Event. (No pod annotation: that would need patch on every
	// pod in the scheduler's RBAC and one more API write per placement.)
	Summary *Summary `json:"summary,omitempty"`
}

// DeepCopyObject lets *Args travel as a runtime.Object into ParseArgs.
func (a *Args) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	c := *a
	if a.Records != nil {
		v := *a.Records
		c.Records = &v
	}
	if a.TopNodes != nil {
		v := *a.TopNodes
		c.TopNodes = &v
	}
	if a.Summary != nil {
		v := *a.Summary
		c.Summary = &v
	}
	return &c
}

var argFields = []string{"records", "topNodes", "summary"}

// ParseArgs decodes (strictly), defaults and validates the args exactly as the scheduler does.
// obj may be nil, a *runtime.Unknown holding JSON or YAML, or an *Args; the result has every
// pointer set.
func ParseArgs(obj runtime.Object) (*Args, error) {
	return pluginargs.Parse(obj, Name, decodeStrict, setDefaults, validate)
}

func decodeStrict(u *runtime.Unknown, into *Args) error {
	_, err := pluginargs.Decode(u, into, argFields)
	return err
}

func setDefaults(a *Args) {
	if a.Records == nil {
		v := int32(DefaultRecords)
		a.Records = &v
	}
	if a.TopNodes == nil {
		v := int32(DefaultTopNodes)
		a.TopNodes = &v
	}
	if a.Summary == nil || *a.Summary == "" {
		v := SummaryNone
		a.Summary = &v
	}
}

func validate(a *Args) field.ErrorList {
	var errs field.ErrorList
	if v := *a.Records; v < 1 || v > MaxRecords {
		errs = append(errs, field.Invalid(field.NewPath("records"), v,
			fmt.Sprintf("must be between 1 and %d (leave the plugin out of the profile to record nothing)", MaxRecords)))
	}
	if v := *a.TopNodes; v < 1 || v > MaxTopNodes {
		errs = append(errs, field.Invalid(field.NewPath("topNodes"), v, fmt.Sprintf("must be between 1 and %d", MaxTopNodes)))
	}
	switch *a.Summary {
	case SummaryNone, SummaryEvent:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("summary"), *a.Summary, []string{string(SummaryNone), string(SummaryEvent)}))
	}
	return errs
}
