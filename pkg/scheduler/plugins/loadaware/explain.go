package loadaware

import (
	"github.com/berth-sched/berth/pkg/decisionapi"
)

// Detail is the part of a decision record's decisionapi.LoadDetail every load-aware plugin shares:
// the node's metrics freshness, the watcher document's source, when the sample was taken,
// and the placed-but-unreported load added to it. Called from Score only when the cycle
// records (a non-nil sink); it neither allocates nor reads the clock.
func (e *Engine) Detail(st NodeState) decisionapi.LoadDetail {
	d := decisionapi.LoadDetail{
		Freshness:              st.Freshness.String(),
		UnreportedMilliCPU:     st.Unreported.MilliCPU,
		UnreportedMemoryBytes:  st.Unreported.MemoryBytes,
		HeldAtEstimateMilliCPU: st.HeldAtEstimate.MilliCPU,
		PerPodUsage:            st.shares != nil,
	}
	if s := e.Watcher.Snapshot(); s != nil {
		d.Source = s.Source
	}
	d.SampledAt = st.Updated
	return d
}
