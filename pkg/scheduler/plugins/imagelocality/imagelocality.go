// Package imagelocality implements NodeImageLocality, the in-tree ImageLocality score fed by
// what nodes really hold: the node agent's NodeImages inventory (every image, names normalised
// so a pod's nginx:1.16 matches the runtime's docker.io/library/nginx:1.16, digests matched as
// digests), kubelet's node.status.images where a node has no inventory, and the images of pods
// just placed on a node (their pull is under way).
package imagelocality

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/berth-sched/berth/pkg/scheduler/dynamicapi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Name is the plugin name in KubeSchedulerConfiguration. It differs from the in-tree
// ImageLocality on purpose: both can be configured, and a profile should enable one of them.
const Name = "NodeImageLocality"

const stateKey fwk.StateKey = Name

// SignerName is this plugin's pod-signature fragment: the pod's image references as
// normalised inventory keys (the in-tree fragment uses un-normalised names).
const SignerName = "v1.Pod.Spec.NormalizedImageReferences()"

// NodeImageLocality is one scheduler profile's instance of the plugin.
type NodeImageLocality struct {
	handle fwk.Handle
	args   *Args
	index  *Index
	logger klog.Logger
}

var (
	_ fwk.PreScorePlugin = &NodeImageLocality{}
	_ fwk.ScorePlugin    = &NodeImageLocality{}
	_ fwk.ReservePlugin  = &NodeImageLocality{}
	// why: on k8s >= 1.35 one Filter/Score plugin without SignPlugin turns opportunistic
	// batching off for every pod of the profile.
	_ fwk.SignPlugin = &NodeImageLocality{}

	_ fwkruntime.PluginFactory = New
)

// New is the registry factory: it starts the NodeImages informer (own dynamic client from the
// handle's kubeconfig) and hooks node and pod events on the scheduler's informer factory.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	dyn, disc, err := dynamicapi.Clients(Name, h)
	if err != nil {
		return nil, err
	}
	return newWithClients(ctx, args, h, dyn, disc)
}

func newWithClients(ctx context.Context, args *Args, h fwk.Handle, dyn dynamic.Interface, disc discovery.DiscoveryInterface) (*NodeImageLocality, error) {
	pl := NewFromIndex(ctx, args, h, NewIndex(args.AssumePulledFor.Duration, *args.UseNodeStatus, nil))
	if f := h.SharedInformerFactory(); f != nil {
		if err := watchNodesAndPods(pl, f); err != nil {
			return nil, fmt.Errorf("%s: informers: %w", Name, err)
		}
	}
	startNodeImagesInformer(ctx, pl, dyn, disc)
	return pl, nil
}

// NewFromIndex builds the plugin on an index its caller feeds (the demo and the benchmarks
// score recorded inventories through exactly the scheduler's code path). args must come from
// ParseArgs.
func NewFromIndex(ctx context.Context, args *Args, h fwk.Handle, ix *Index) *NodeImageLocality {
	return &NodeImageLocality{handle: h, args: args, index: ix, logger: klog.FromContext(ctx).WithName(Name)}
}

// Index is the plugin's image index.
func (pl *NodeImageLocality) Index() *Index { return pl.index }

// Name returns the plugin name.
func (pl *NodeImageLocality) Name() string { return Name }

type cycleData struct{ sums Sums }

// Clone shares the data: nothing mutates it after PreScore.
func (c *cycleData) Clone() fwk.StateData { return c }

// snapshotNodes is the scheduling snapshot as a NodeSet: all nodes, not only feasible ones, as
// the in-tree spread factor uses.
type snapshotNodes struct {
	lister fwk.NodeInfoLister
	n      int
}

func (s snapshotNodes) Has(node string) bool {
	ni, err := s.lister.Get(node)
	return err == nil && ni != nil && ni.Node() != nil
}
func (s snapshotNodes) Len() int { return s.n }

func (pl *NodeImageLocality) compute(pod *v1.Pod) (Sums, error) {
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	all, err := lister.List()
	if err != nil {
		return Sums{}, err
	}
	pi := imagesOf(pod)
	if len(pi.invalid) > 0 {
		invalidRefs.WithLabelValues(sourcePod).Add(float64(len(pi.invalid)))
	}
	return pl.index.Compute(pi, snapshotNodes{lister: lister, n: len(all)}), nil
}

// PreScore sums, once per cycle, each node's spread-scaled image sizes; Score only reads the
// result. When no node holds any of the pod's images every score would be 0, so Score is
// skipped.
func (pl *NodeImageLocality) PreScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	sums, err := pl.compute(pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	cs.Write(stateKey, &cycleData{sums: sums})
	if len(sums.Invalid) > 0 {
		klog.FromContext(ctx).V(2).Info("Pod image references that do not parse score nothing", "pod", klog.KObj(pod), "images", sums.Invalid)
	}
	if len(sums.ByNode) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

func (pl *NodeImageLocality) sumsFor(cs fwk.CycleState, pod *v1.Pod) (Sums, error) {
	if cs != nil {
		if d, err := cs.Read(stateKey); err == nil {
			if c, ok := d.(*cycleData); ok {
				return c.sums, nil
			}
		}
	}
	return pl.compute(pod)
}

// Score is the in-tree ImageLocality score of the node's precomputed sum.
func (pl *NodeImageLocality) Score(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	sums, err := pl.sumsFor(cs, pod)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	return Priority(sums.ByNode[node.Name], sums.ImageCount, *pl.args.TieBreakSmallImages), nil
}

// ScoreExtensions is nil: scores are already 0..100, as in-tree.
func (pl *NodeImageLocality) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve counts the pod's images as present on its node at once, so the next pod of the same
// image sees the pull under way before any inventory reports it.
func (pl *NodeImageLocality) Reserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	var keys []string
	if d, err := cs.Read(stateKey); err == nil {
		if c, ok := d.(*cycleData); ok {
			keys = c.sums.Keys
		}
	}
	if keys == nil {
		for _, ku := range imagesOf(pod).keys {
			keys = append(keys, ku.key)
		}
	}
	pl.index.AssumePulled(pod.UID, nodeName, keys, pl.index.now())
	return nil
}

// Unreserve drops a placement that did not happen; idempotent.
func (pl *NodeImageLocality) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.index.Forget(pod.UID, nodeName)
}

// SignPod returns the pod's image uses as normalised keys (sorted, duplicates kept: they count
// per use), so pods that score alike share a signature.
func (pl *NodeImageLocality) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	pi := imagesOf(pod)
	uses := make([]string, 0, pi.count)
	for _, ku := range pi.keys {
		for i := 0; i < ku.uses; i++ {
			uses = append(uses, ku.key)
		}
	}
	for _, bad := range pi.invalid {
		uses = append(uses, "invalid:"+bad)
	}
	sort.Strings(uses)
	return []fwk.SignFragment{{Key: SignerName, Value: uses}}, nil
}

// placedAt is when a bound pod was placed: its PodScheduled transition, else its creation
// (pods created with spec.nodeName never get one).
func placedAt(p *v1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}
