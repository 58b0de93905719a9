package imagelocality

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-sched/berth/pkg/scheduler/pluginargs"
)

// Defaults and bounds of the arguments.
const (
	// DefaultAssumePulledFor is how long an image counts as present on a node after a pod that
	// uses it was placed there: long enough for a large pull to finish and the agent's next
	// inventory (default every 30s) to report it, short enough that a failed pull stops
	// attracting pods soon.
	DefaultAssumePulledFor = 5 * time.Minute
	// MaxAssumePulledFor bounds the window; past an hour the "pull under way" claim is fiction.
	MaxAssumePulledFor = time.Hour
)

// Args configures NodeImageLocality. The score weight lives in the profile, not here.
type Args struct {
	metav1.TypeMeta `json:",inline"`

	// AssumePulledFor is how long the images of a pod placed on a node (by this scheduler at
	// Reserve, or by anyone as seen by the pod informer) count as present on that node.
	// 0 turns the accounting off. Default 5m, at most 1h.
	AssumePulledFor *metav1.Duration `json:"assumePulledFor,omitempty"`

	// UseNodeStatus reads node.status.images for nodes that have no NodeImages object
	// (kubelet's list: the 50 largest images, names as the runtime reports them, normalised
	// here). Default true.
	UseNodeStatus *bool `json:"useNodeStatus,omitempty"`

	// TieBreakSmallImages gives score 1 instead of 0 to a node that holds some of the pod's
	// images whose spread-scaled size stays below the in-tree 23 MiB floor (busybox, distroless
	// images), so such a node still wins ties against one that would have to pull. Default true;
	// false gives exactly the in-tree ImageLocality formula.
	TieBreakSmallImages *bool `json:"tieBreakSmallImages,omitempty"`
}

// DeepCopyObject lets *Args travel as a runtime.Object into ParseArgs.
func (a *Args) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	c := *a
	if a.AssumePulledFor != nil {
		d := *a.AssumePulledFor
		c.AssumePulledFor = &d
	}
	if a.UseNodeStatus != nil {
		b := *a.UseNodeStatus
		c.UseNodeStatus = &b
	}
	if a.TieBreakSmallImages != nil {
		b := *a.TieBreakSmallImages
		c.TieBreakSmallImages = &b
	}
	return &c
}

var argFields = []string{"assumePulledFor", "useNodeStatus", "tieBreakSmallImages"}

// ParseArgs decodes (strictly: unknown fields are errors), defaults and validates the args
// exactly as the scheduler does. obj may be nil, a *runtime.Unknown holding JSON or YAML, or
// an *Args. The result has every pointer set.
func ParseArgs(obj runtime.Object) (*Args, error) {
	return pluginargs.Parse(obj, Name, decodeStrict, setDefaults, validate)
}

func decodeStrict(u *runtime.Unknown, into *Args) error {
	keys, err := pluginargs.Decode(u, into, argFields)
	if err != nil {
		if k, ok := keys["assumePulledFor"]; ok {
			// metav1.Duration reports a bad duration without naming the field.
			var s string
			if json.Unmarshal(k, &s) == nil {
				if _, perr := time.ParseDuration(s); perr != nil {
					return field.Invalid(field.NewPath("assumePulledFor"), s, "must be a duration such as 90s or 5m")
				}
			}
		}
	}
	return err
}

func setDefaults(a *Args) {
	if a.AssumePulledFor == nil {
		a.AssumePulledFor = &metav1.Duration{Duration: DefaultAssumePulledFor}
	}
	if a.UseNodeStatus == nil {
		t := true
		a.UseNodeStatus = &t
	}
	if a.TieBreakSmallImages == nil {
		t := true
		a.TieBreakSmallImages = &t
	}
}

func validate(a *Args) field.ErrorList {
	var errs field.ErrorList
	if d := a.AssumePulledFor.Duration; d < 0 || d > MaxAssumePulledFor {
		errs = append(errs, field.Invalid(field.NewPath("assumePulledFor"), d.String(),
			fmt.Sprintf("must be between 0 (off) and %s", MaxAssumePulledFor)))
	}
	return errs
}
