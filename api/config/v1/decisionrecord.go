package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Summary says where the one-line summary of a placement goes.
// +kubebuilder:validation:Enum=None;Event
type Summary string

// Summary targets.
const (
	// SummaryNone: the record is only served on the debug endpoint.
	SummaryNone Summary = "None"
	// SummaryEvent appends the summary to the message of the pod's Scheduled event.
	SummaryEvent Summary = "Event"
)

// DecisionRecordArgs are DecisionRecord's arguments, per profile.
// +berth:plugin:name=DecisionRecord,order=90,entry=DecisionRecordPlugin,inline,package=pkg/scheduler/decisionrecord
// +berth:plugin:doc=DecisionRecord keeps, per pod, why the scheduler placed it where it did (Filter verdicts
// +berth:plugin:doc=and Score plugins' scores per node), served on the scheduler's secure port at
// +berth:plugin:doc=/debug/berth/explain and read with `kubectl berth explain pod NAME`. Recording is on in
// +berth:plugin:doc=every profile rendered from this resource unless enabled is false; leaving the field out
// +berth:plugin:doc=records with the plugin's defaults.
// +kubebuilder:object:root=true
type DecisionRecordArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Records is how many pods' latest decisions each profile keeps, LRU by last attempt
	// (default 1000).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Records *int32 `json:"records,omitempty"`
	// TopNodes is how many nodes a record keeps in detail: the best-scored feasible ones and
	// the first refused ones; the rest are counted (default 10).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	TopNodes *int32 `json:"topNodes,omitempty"`
	// Summary: None (default) keeps records on the debug endpoint only; Event also appends a
	// one-line summary to the pod's Scheduled event. (No pod annotation: that would need patch
	// on every pod in the scheduler's RBAC and one more API write per placement.)
	// +optional
	Summary *Summary `json:"summary,omitempty"`
}

// DecisionRecord's defaults.
const (
	DefaultRecords  int32 = 1000
	DefaultTopNodes int32 = 10
)

// SetDefaults_DecisionRecordArgs fills unset fields.
func SetDefaults_DecisionRecordArgs(obj *DecisionRecordArgs) {
	setDefault(&obj.Records, DefaultRecords)
	setDefault(&obj.TopNodes, DefaultTopNodes)
	if obj.Summary == nil || *obj.Summary == "" {
		s := SummaryNone
		obj.Summary = &s
	}
}
