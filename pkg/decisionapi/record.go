// Package decisionapi is the wire contract of berth-scheduler's decision records: what
// /debug/berth/explain serves, and the details the Score plugins report, plus the pure text
// both sides derive from a record (the Scheduled event's one-line summary, a plugin's detail
// line). Like pkg/loadapi it imports neither side: the scheduler's recorder
// (pkg/scheduler/decisionrecord), the plugins and `kubectl berth explain` (cmd/kubectl-berth)
// depend on it.
package decisionapi

import "time"

// Path is where the records are served on the scheduler's secure port.
const Path = "/debug/berth/explain"

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
	// HintFrom is the pod (namespace/name) whose scoring produced NodeHint: its record holds
	// the scores this placement reused.
	HintFrom string `json:"hintFrom,omitempty"`
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

// ScorePlugins lists the plugins that scored any node of r, in the order they first appear.
func (r Record) ScorePlugins() []string {
	var plugins []string
	seen := map[string]bool{}
	for _, n := range r.Nodes {
		for _, s := range n.Scores {
			if !seen[s.Plugin] {
				seen[s.Plugin] = true
				plugins = append(plugins, s.Plugin)
			}
		}
	}
	return plugins
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
	// Details are the inputs a plugin read for its score on this node (LoadDetail for the
	// load-aware plugins, SySchedDetail for SySched), keyed by plugin name, recorded by the
	// plugin inside Score of this very cycle.
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

// NotFound is the endpoint's 404 body: why there is no record, in words.
type NotFound struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
	// SchedulerStarted is when this scheduler instance started: it holds no record of
	// anything scheduled before.
	SchedulerStarted time.Time `json:"schedulerStarted"`
}

// Reasons a record is missing.
const (
	ReasonDisabled       = "RecordingDisabled"
	ReasonOtherScheduler = "OtherScheduler"
	ReasonEvicted        = "Evicted"
	ReasonBeforeStart    = "BeforeStart"
	ReasonNeverSeen      = "NeverSeen"
	ReasonStale          = "Stale"
	ReasonBadRequest     = "BadRequest"
)

// LoadDetail is what a load-aware plugin (TargetLoadPacking, LoadVariationRiskBalancing) read
// for one node in Score: enough to redo the formula by hand.
type LoadDetail struct {
	// Freshness of the node's metrics: fresh, stale, expired or missing (then the score is
	// the plugin's neutral score and the numbers below are absent).
	Freshness string `json:"freshness"`
	// Source is the load watcher document's source (e.g. BerthAgent, Prometheus).
	Source string `json:"source,omitempty"`
	// SampledAt is when the node's sample was taken (on the scheduler's clock); AgeSeconds is
	// its age when the cycle scored (the recorder fills it in for the nodes it keeps, so
	// Score does not read the clock once more per node).
	SampledAt  time.Time `json:"sampledAt,omitzero"`
	AgeSeconds float64   `json:"ageSeconds"`
	// Neutral is set when the plugin gave its neutral score for unknown load.
	Neutral bool `json:"neutral,omitempty"`
	// UnreportedMilliCPU and UnreportedMemoryBytes are the placed pods' remaining estimate:
	// what of the estimates of pods placed on the node the scored window average does not hold
	// yet (estimate − the pod's window share with per-pod usage, estimate × (1 − covered/window)
	// without), added to the measured load.
	UnreportedMilliCPU    int64 `json:"unreportedMilliCPU"`
	UnreportedMemoryBytes int64 `json:"unreportedMemoryBytes"`
	// HeldAtEstimateMilliCPU is the part of UnreportedMilliCPU that pods in their estimate
	// window (estimateSeconds) make: measured, but counted at no less than their estimate.
	HeldAtEstimateMilliCPU int64 `json:"heldAtEstimateMilliCPU,omitempty"`
	// PerPodUsage says the node's report carried per-pod usage (the remaining estimate used it
	// where the pod had a share; otherwise the time rule).
	PerPodUsage bool `json:"perPodUsage,omitempty"`

	// TargetLoadPacking: measured CPU % (MeasuredPercent: the window average), node CPU
	// capacity, the pod's predicted CPU, the utilisation predicted after placing it, and the
	// target. PodMilliCPU and PodMemoryBytes (the incoming pod's estimate) are set by
	// LoadVariationRiskBalancing too.
	MeasuredPercent  float64 `json:"measuredPercent,omitempty"`
	CapacityMilliCPU int64   `json:"capacityMilliCPU,omitempty"`
	PodMilliCPU      int64   `json:"podMilliCPU,omitempty"`
	PodMemoryBytes   int64   `json:"podMemoryBytes,omitempty"`
	PredictedPercent float64 `json:"predictedPercent,omitempty"`
	TargetPercent    int64   `json:"targetPercent,omitempty"`
	// HeadroomPercent is TargetLoadPacking's varianceMargin times the window's CPU standard
	// deviation: part of PredictedPercent, absent with the upstream margin 0.
	HeadroomPercent float64 `json:"headroomPercent,omitempty"`

	// LoadVariationRiskBalancing: per resource, mean and standard deviation in % of
	// allocatable and the score it gives (the node's score is the lower one); absent (zero)
	// for a resource the node has no metrics for. Values, not pointers: Score fills a
	// LoadDetail without allocating.
	CPU    RiskTerms `json:"cpu,omitzero"`
	Memory RiskTerms `json:"memory,omitzero"`

	// Terms are the named inputs and intermediate values of any other load-aware plugin, in
	// its formula's order, and Formula says in words how they make the score: a plugin added
	// later explains itself through them, and this package writes its text without a change.
	// Filled only for a record, never in Score.
	Terms   []Term `json:"terms,omitempty"`
	Formula string `json:"formula,omitempty"`

	// PodEstimate says where the incoming pod's estimate came from: its workload's profile
	// (learned from its measured siblings) or the plugin's spec rule, and why. Filled only for
	// a record.
	PodEstimate EstimateSource `json:"podEstimate,omitzero"`
}

// Sources of a pod's estimate (EstimateSource.Source).
const (
	EstimateFromProfile   = "profile"
	EstimateFromSpec      = "spec"
	EstimateFromNamespace = "namespace"
)

// EstimateSource is where a pod's estimate came from.
type EstimateSource struct {
	// Source is EstimateFromProfile, EstimateFromNamespace (CPU from the namespace's ratio,
	// memory from the spec rule) or EstimateFromSpec.
	Source string `json:"source"`
	// Reason says why no profile applied: the pod has no controlling owner, its workload has
	// no measured pod, too few, or pods not alike.
	Reason string `json:"reason,omitempty"`
	// Workload is the profile's key (namespace/controller UID@template hash), when the pod has one.
	Workload string `json:"workload,omitempty"`
	// The profile, when the workload has one (also when too small or unlike to be used): the
	// estimate a new pod counts at, the percentile of the siblings' averages it comes from,
	// their spread (std / mean), how many siblings were measured and the newest sample's age.
	EstimateMilliCPU    int64   `json:"estimateMilliCPU,omitempty"`
	EstimateMemoryBytes int64   `json:"estimateMemoryBytes,omitempty"`
	PercentileMilliCPU  float64 `json:"percentileMilliCPU,omitempty"`
	SpreadCPU           float64 `json:"spreadCPU,omitempty"`
	SpreadMemory        float64 `json:"spreadMemory,omitempty"`
	Samples             int     `json:"samples,omitempty"`
	AgeSeconds          float64 `json:"ageSeconds,omitempty"`
	// RampSeconds is how long the siblings seen starting took (median) from binding to their
	// use; 0 when none was seen starting.
	RampSeconds float64 `json:"rampSeconds,omitempty"`
	// Namespace is the pod's namespace's use-to-request ratio when it has one (also when too
	// few pods were measured for it to be used).
	Namespace *NamespaceRatio `json:"namespace,omitempty"`
}

// NamespaceRatio is what a namespace's measured pods use of their CPU request.
type NamespaceRatio struct {
	// Mean and SD of the measured pods' CPU use ÷ CPU request.
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	// Pods is how many measured pods it is from; AgeSeconds the newest sample's age.
	Pods       int     `json:"pods"`
	AgeSeconds float64 `json:"ageSeconds"`
	// RequestMilliCPU is the pod's CPU request and EstimateMilliCPU what it counts at alone:
	// request × (mean + margin × SD), rounded up.
	RequestMilliCPU  int64 `json:"requestMilliCPU"`
	EstimateMilliCPU int64 `json:"estimateMilliCPU"`
}

// Term is one named number of a plugin's score on a node.
type Term struct {
	// Resource the term is about (cpu, memory), or "" for the node as a whole.
	Resource string  `json:"resource,omitempty"`
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	// Key terms make the short explanation beside the score; the rest the input line.
	Key bool `json:"key,omitempty"`
}

// RiskTerms is one resource's part of LoadVariationRiskBalancing's score.
type RiskTerms struct {
	// Valid says the resource had metrics (the other fields are then meaningful).
	Valid       bool    `json:"valid"`
	AvgPercent  float64 `json:"avgPercent"`
	StdPercent  float64 `json:"stdPercent"`
	Allocatable float64 `json:"allocatable"`
	Request     float64 `json:"request"`
	Score       float64 `json:"score"`
	Margin      float64 `json:"margin"`
	Sensitivity float64 `json:"sensitivity"`
}

// SySchedDetail is SySched's ExS for one node: ExS = |H∖P| + Σ_q |(H∪P)∖S_q|, computed as
// |H∖P| + n·|H∪P| − Σ_q|S_q| (H: union of the node's pods' syscall sets, P: the incoming pod's
// set, n: pods on the node).
type SySchedDetail struct {
	ExS       int64 `json:"exs"`
	Pods      int   `json:"pods"`
	NodeSet   int   `json:"nodeSyscalls"`
	PodSet    int   `json:"podSyscalls"`
	HMinusP   int   `json:"hMinusP"`
	HUnionP   int   `json:"hUnionP"`
	SumPodSet int64 `json:"sumPodSyscalls"`
	// Notes say what the pod's set rests on besides what it names: missing profiles counted
	// as the full set, bindings skipped (a missing profile), a node refused for a profile not
	// installed there.
	Notes []string `json:"notes,omitempty"`
}
