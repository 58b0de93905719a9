// Package placedload is the contract between berth-scheduler and `kubectl berth nodes` for the
// load the scheduler's load-aware plugins add to a node for pods they placed that the node's
// report does not include yet. It imports neither side.
package placedload

// Path is where berth-scheduler serves the answer on its secure port (authorised like
// /debug/berth/explain: get on the non-resource URL).
const Path = "/debug/berth/placed"

// Answer is every load-aware plugin's view, per scheduler profile.
type Answer struct {
	Profiles []Profile `json:"profiles"`
}

// Profile is one plugin of one profile.
type Profile struct {
	Profile string `json:"profile"`
	Plugin  string `json:"plugin"`
	// Nodes holds the nodes with placed pods not yet in their report, and what they add.
	Nodes map[string]Load `json:"nodes"`
}

// Load is the estimated load of placed pods: millicores and bytes, each ≥ 0.
type Load struct {
	MilliCPU    int64 `json:"milliCPU"`
	MemoryBytes int64 `json:"memoryBytes"`
	// Pods is how many placed pods the load is (≥ 0), FromProfile how many of them count at
	// their workload's learned profile rather than their spec (0..Pods), FromNamespace how many
	// at their namespace's learned use-to-request ratio (0..Pods − FromProfile). Absent from
	// older schedulers' answers: 0.
	Pods          int `json:"pods,omitempty"`
	FromProfile   int `json:"fromProfile,omitempty"`
	FromNamespace int `json:"fromNamespace,omitempty"`
}
