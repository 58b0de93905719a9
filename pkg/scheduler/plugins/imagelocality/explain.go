package imagelocality

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	intree "k8s.io/kubernetes/pkg/scheduler/framework/plugins/imagelocality"
)

// snapshotHandle is the part of a framework handle both image plugins use for scoring.
type snapshotHandle struct {
	fwk.Handle
	snap *cache.Snapshot
}

func (h *snapshotHandle) SnapshotSharedLister() fwk.SharedLister { return h.snap }

// Explanation is every node's score for one pod from NodeImageLocality and from the in-tree
// ImageLocality, computed by the plugins' own PreScore/Score on the given cluster state.
type Explanation struct {
	NodeImageLocality map[string]int64
	InTree            map[string]int64
}

// Explain scores pod on every node the way berth-scheduler and the default scheduler would:
// a scheduling snapshot of nodes (node.status.images included), an index fed with the
// NodeImages objects (their unstructured content) and, for assumed pulls, the bound pods as
// the pod informer would see them. It runs the plugins' real methods, so tools (the demo) can
// show per-node scores that the scheduler does not publish.
func Explain(ctx context.Context, args *Args, nodes []*v1.Node, nodeImages []map[string]any, bound []*v1.Pod, pod *v1.Pod) (*Explanation, error) {
	if args == nil {
		var err error
		if args, err = ParseArgs(nil); err != nil {
			return nil, err
		}
	}
	h := &snapshotHandle{snap: cache.NewSnapshot(nil, nodes)}
	ix := NewIndex(args.AssumePulledFor.Duration, *args.UseNodeStatus, nil)
	for _, n := range nodes {
		onNodeStatus(ix, n)
	}
	for _, obj := range nodeImages {
		if p, ok := parseObject(&unstructured.Unstructured{Object: obj}, ix.names).(*parsedNodeImages); ok {
			ix.setInventory(p.Name, p.inv)
		}
	}
	for _, p := range bound {
		onPod(ix, p)
	}
	pl := NewFromIndex(ctx, args, h, ix)
	ref, err := intree.New(ctx, nil, h)
	if err != nil {
		return nil, err
	}
	all, err := h.snap.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	out := &Explanation{NodeImageLocality: map[string]int64{}, InTree: map[string]int64{}}
	cs := framework.NewCycleState()
	st := pl.PreScore(ctx, cs, pod, all)
	if !st.IsSuccess() && !st.IsSkip() {
		return nil, st.AsError()
	}
	for _, ni := range all {
		name := ni.Node().Name
		if !st.IsSkip() {
			s, sst := pl.Score(ctx, cs, pod, ni)
			if !sst.IsSuccess() {
				return nil, sst.AsError()
			}
			out.NodeImageLocality[name] = s
		} else {
			out.NodeImageLocality[name] = 0
		}
		s, sst := ref.(fwk.ScorePlugin).Score(ctx, framework.NewCycleState(), pod, ni)
		if !sst.IsSuccess() {
			return nil, fmt.Errorf("in-tree ImageLocality: %w", sst.AsError())
		}
		out.InTree[name] = s
	}
	return out, nil
}
