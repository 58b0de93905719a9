package explain

import "time"

// Outcome of the latest scheduling attempt of a pod.
const (
	OutcomeInProgress    = "InProgress"
	OutcomeScheduled     = "Scheduled"
	OutcomeUnschedulable = "Unschedulable"
	OutcomeError         = "Error"
)

// Record is the decision of the latest scheduling attempt for one pod, as served by the
// endpoint. Field names are part of the endpoint's contract (kubectl berth reads them).
type Record struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       string    `json:"uid"`
	Profile   string    `json:"profile"`
	Attempts  int       `json:"attempts"`
	Started   time.Time `json:"started"`
	Outcome   string    `json:"outcome"`
	// Chosen is the node the pod was reserved on (empty unless scheduled).
	Chosen string `json:"chosen,omitempty"`
	// PreFilter is set when a PreFilter plugin refused the pod for every node.
	PreFilter *Verdict `json:"preFilter,omitempty"`
	// NodeHint is the node opportunistic batching suggested from an identical previous pod;
	// when it fits, only that node was filtered and scores were not recomputed.
	NodeHint string `json:"nodeHint,omitempty"`
	// Weights of the profile's Score plugins.
	Weights map[string]int `json:"weights,omitempty"`
	// Nodes: the best-scored feasible nodes (chosen first), then refused nodes, at most
	// TopNodes of each.
	Nodes []NodeRecord `json:"nodes"`
	// Feasible and Refused count every node evaluated in this attempt; Omitted* count those
	// not listed in Nodes.
	Feasible        int `json:"feasible"`
	Refused         int `json:"refused"`
	OmittedFeasible int `json:"omittedFeasible"`
	OmittedRefused  int `json:"omittedRefused"`
	// RefusedBy counts refused nodes per plugin and reason, over all refused nodes.
	RefusedBy []ReasonCount `json:"refusedBy,omitempty"`
	// ScoringSkipped is set when only one node was feasible (the scheduler does not score).
	ScoringSkipped bool `json:"scoringSkipped,omitempty"`
	// PostFilter is the message of the PostFilter (preemption) phase, if it ran.
	PostFilter string `json:"postFilter,omitempty"`
	// Error is set when the attempt ended with an error status.
	Error string `json:"error,omitempty"`
}

// Verdict is a Filter (or PreFilter) refusal.
type Verdict struct {
	Plugin  string   `json:"plugin"`
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
}

// NodeRecord is one node's part of the decision.
type NodeRecord struct {
	Node     string        `json:"node"`
	Feasible bool          `json:"feasible"`
	Filter   *Verdict      `json:"filter,omitempty"`
	Scores   []PluginScore `json:"scores,omitempty"`
	Total    int64         `json:"total"`
	Chosen   bool          `json:"chosen,omitempty"`
	// Details are plugin-provided inputs of their scores (e.g. the utilisation a load-aware
	// plugin read), keyed by plugin name.
	Details map[string]any `json:"details,omitempty"`
}

// PluginScore is one Score plugin's result on one node: Raw is what Score returned,
// Normalized what NormalizeScore made of it (equal to Raw without ScoreExtensions),
// Weighted = Normalized × Weight, and Total (on the node) is the sum of Weighted.
type PluginScore struct {
	Plugin     string `json:"plugin"`
	Raw        int64  `json:"raw"`
	Normalized int64  `json:"normalized"`
	Weight     int    `json:"weight"`
	Weighted   int64  `json:"weighted"`
}

// ReasonCount is how many nodes one plugin refused with one reason.
type ReasonCount struct {
	Plugin string `json:"plugin"`
	Reason string `json:"reason"`
	Nodes  int    `json:"nodes"`
}
