package instanceisolation

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-sched/berth/pkg/scheduler/pluginargs"
)

// DefaultClassLabels are the pod label keys that carry an instance class: IPP's own key, so
// pods written for the Instance-per-Pod webhook keep working, and Berth's.
var DefaultClassLabels = []string{"ipp-class", "berth.dev/instance-class"}

// Args configures InstanceIsolation. The score weight lives in the profile, not here.
type Args struct {
	metav1.TypeMeta `json:",inline"`

	// ClassLabels are the pod label keys whose value is the pod's instance class, in order of
	// preference for messages. A pod carrying two of them with different values is refused.
	// Default ["ipp-class", "berth.dev/instance-class"].
	ClassLabels []string `json:"classLabels,omitempty"`

	// Strict keeps pods without a class and classed pods apart in both directions: a pod
	// without a class is refused on a node holding classed pods, and a classed pod on a node
	// holding unclassed (non-exempt) pods. This is what IPP's `ipp-class NotIn [X]` term does.
	// Default false: only two different classes never share a node.
	Strict *bool `json:"strict,omitempty"`

	// SpreadReplicas allows at most one classed pod per node per controller (the owner
	// reference with controller=true: ReplicaSet, StatefulSet, Job, ...). Default false.
	SpreadReplicas *bool `json:"spreadReplicas,omitempty"`

	// ExemptNamespaces: pods in these namespaces neither count on a node nor are filtered.
	ExemptNamespaces []string `json:"exemptNamespaces,omitempty"`

	// ExemptSelector: pods whose labels match it neither count on a node nor are filtered.
	// DaemonSet-owned pods and mirror (static) pods are always exempt.
	ExemptSelector *metav1.LabelSelector `json:"exemptSelector,omitempty"`
}

// DeepCopyObject lets *Args travel as a runtime.Object into ParseArgs.
func (a *Args) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	c := *a
	c.ClassLabels = cloneStrings(a.ClassLabels)
	c.ExemptNamespaces = cloneStrings(a.ExemptNamespaces)
	if a.Strict != nil {
		b := *a.Strict
		c.Strict = &b
	}
	if a.SpreadReplicas != nil {
		b := *a.SpreadReplicas
		c.SpreadReplicas = &b
	}
	c.ExemptSelector = a.ExemptSelector.DeepCopy()
	return &c
}

// cloneStrings keeps nil and empty apart: an explicit empty classLabels must stay invalid.
func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append(make([]string, 0, len(s)), s...)
}

var argFields = []string{"classLabels", "strict", "spreadReplicas", "exemptNamespaces", "exemptSelector"}

// ParseArgs decodes (strictly: unknown fields are errors), defaults and validates the args
// exactly as the scheduler does. obj may be nil, a *runtime.Unknown holding JSON or YAML, or
// an *Args. The result has every pointer set and ClassLabels non-empty.
func ParseArgs(obj runtime.Object) (*Args, error) {
	return pluginargs.Parse(obj, Name, decodeStrict, setDefaults, validate)
}

func decodeStrict(u *runtime.Unknown, into *Args) error {
	_, err := pluginargs.Decode(u, into, argFields)
	return err
}

func setDefaults(a *Args) {
	if a.ClassLabels == nil {
		a.ClassLabels = cloneStrings(DefaultClassLabels)
	}
	if a.Strict == nil {
		f := false
		a.Strict = &f
	}
	if a.SpreadReplicas == nil {
		f := false
		a.SpreadReplicas = &f
	}
}

func validate(a *Args) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("classLabels")
	if len(a.ClassLabels) == 0 {
		errs = append(errs, field.Required(p, "must name at least one pod label key (default "+fmt.Sprint(DefaultClassLabels)+")"))
	}
	seen := map[string]bool{}
	for i, k := range a.ClassLabels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Index(i), k, "must be a label key: "+msg))
		}
		if seen[k] {
			errs = append(errs, field.Duplicate(p.Index(i), k))
		}
		seen[k] = true
	}
	p = field.NewPath("exemptNamespaces")
	seen = map[string]bool{}
	for i, ns := range a.ExemptNamespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(p.Index(i), ns, "must be a namespace name: "+msg))
		}
		if seen[ns] {
			errs = append(errs, field.Duplicate(p.Index(i), ns))
		}
		seen[ns] = true
	}
	if a.ExemptSelector != nil {
		p = field.NewPath("exemptSelector")
		errs = append(errs, metav1validation.ValidateLabelSelector(a.ExemptSelector, metav1validation.LabelSelectorValidationOptions{}, p)...)
		if len(errs) == 0 {
			if _, err := metav1.LabelSelectorAsSelector(a.ExemptSelector); err != nil {
				errs = append(errs, field.Invalid(p, a.ExemptSelector.String(), err.Error()))
			}
		}
	}
	return errs
}

// exemptSelector is the compiled ExemptSelector of validated args; nil when unset. An empty
// selector ({}) matches every pod, as everywhere in Kubernetes.
func exemptSelector(a *Args) labels.Selector {
	if a.ExemptSelector == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(a.ExemptSelector)
	if err != nil {
		// validate already compiled it.
		return labels.Nothing()
	}
	return s
}
