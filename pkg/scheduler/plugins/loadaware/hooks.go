package loadaware

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Hooks are the extension points every load-aware plugin has alike: PreFilter, Filter (the
// expired-metrics policy and usage thresholds), Reserve and Unreserve, all the engine's. A
// plugin embeds Hooks (HooksFor its engine) so a new load-aware plugin writes only its score.
type Hooks struct{ e *Engine }

// HooksFor are e's hooks.
func HooksFor(e *Engine) Hooks { return Hooks{e: e} }

// PreFilter implements fwk.PreFilterPlugin: Skip (so the framework calls no Filter this cycle)
// when Filter has nothing to check, as with default args.
func (h Hooks) PreFilter(_ context.Context, _ fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return nil, h.e.PreFilter()
}

// PreFilterExtensions implements fwk.PreFilterPlugin: Filter reads no per-cycle state.
func (h Hooks) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter implements fwk.FilterPlugin: the expired-metrics policy and usage thresholds; a
// no-op with default args.
func (h Hooks) Filter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	return h.e.Filter(ctx, pod, nodeInfo.Node())
}

// Reserve implements fwk.ReservePlugin: the pod counts on its node until reported.
func (h Hooks) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	h.e.Reserve(pod, nodeName)
	return nil
}

// Unreserve implements fwk.ReservePlugin.
func (h Hooks) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	h.e.Unreserve(pod)
}
