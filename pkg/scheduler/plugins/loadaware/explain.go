package loadaware

import (
	v1 "k8s.io/api/core/v1"

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

// Reasons the spec rule applied to a pod (decisionapi.EstimateSource.Reason) besides a
// profile's own (workloadprofile.Reason*).
const (
	ReasonNoController = "no controlling owner"
	ReasonNotMeasured  = "no measured sibling"
	ReasonProfilesOff  = "workload profiles off"
)

// ExplainEstimate writes into d where pod's estimate came from: its workload's profile (key,
// value, samples, age) or the spec rule and why. Record path only.
func (e *Engine) ExplainEstimate(pod *v1.Pod, d *decisionapi.LoadDetail) {
	prof, key, hasKey, found := e.Profiles.Lookup(pod)
	src := decisionapi.EstimateSource{Source: decisionapi.EstimateFromSpec}
	switch {
	case e.Profiles == nil:
		src.Reason = ReasonProfilesOff
	case !hasKey:
		src.Reason = ReasonNoController
	case !found:
		src.Workload, src.Reason = key.String(), ReasonNotMeasured
	default:
		src.Workload = key.String()
		src.EstimateMilliCPU, src.EstimateMemoryBytes = prof.EstimateMilliCPU, prof.EstimateMemoryBytes
		src.PercentileMilliCPU, src.SpreadCPU, src.SpreadMemory = prof.MilliCPU, prof.SpreadCPU, prof.SpreadMemory
		src.Samples, src.AgeSeconds = prof.Samples, e.now().Sub(prof.Updated).Seconds()
		src.RampSeconds = prof.Ramp.Seconds()
		if prof.Usable {
			src.Source = decisionapi.EstimateFromProfile
		} else {
			src.Reason = prof.Reason
		}
	}
	if src.Source == decisionapi.EstimateFromSpec {
		if r, req, ok := e.Profiles.NamespaceRatio(pod); ok {
			est, _, _ := r.Estimate(req, e.Profiles.args.Margin)
			src.Namespace = &decisionapi.NamespaceRatio{Mean: r.Mean, SD: r.SD, Pods: r.Samples,
				AgeSeconds: e.now().Sub(r.Updated).Seconds(), RequestMilliCPU: req, EstimateMilliCPU: est}
			if r.Usable {
				src.Source = decisionapi.EstimateFromNamespace
			}
		}
	}
	d.PodEstimate = src
}
