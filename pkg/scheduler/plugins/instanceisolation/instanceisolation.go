// Package instanceisolation implements InstanceIsolation: pods carrying an instance class
// (IPP's ipp-class label, or Berth's berth.dev/instance-class) run only on nodes where every
// non-exempt pod has the same effective class, counting the pods this scheduler has placed
// but not yet bound. A class value belongs to the namespace of the pod carrying it unless an
// InstanceClass shares it between namespaces (classes.go). It is what Instance-per-Pod's `ipp-class NotIn [X]` pod
// anti-affinity on kubernetes.io/hostname asks for, read from a per-node class index in O(1)
// per node instead of the generic InterPodAffinity machinery.
package instanceisolation

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/berth-sched/berth/pkg/isolation/classrule"
)

// Name is the plugin name in KubeSchedulerConfiguration.
const Name = classrule.PluginName

const stateKey fwk.StateKey = Name

// SignerName is this plugin's pod-signature fragment: what Filter and Score read from the
// incoming pod (exemption, classes, and the controller when spreadReplicas is on).
const SignerName = "v1.Pod.Labels.InstanceClass()"

// syncTimeout bounds the one wait, at the first cycle, for the pod handler to have seen the
// informer's initial list.
const syncTimeout = 30 * time.Second

// InstanceIsolation is one scheduler profile's instance of the plugin.
type InstanceIsolation struct {
	args   *Args
	cls    *classrule.Classifier
	index  *Index
	strict bool
	spread bool
	logger klog.Logger

	synced     func() bool
	syncedOnce atomic.Bool
	// last is the state PreFilter or PreScore wrote and the CycleState it went into: Filter and
	// Score run once per node, and reading the framework's CycleState is a concurrent map
	// lookup each time, while the cycle's own state is one pointer comparison away.
	last atomic.Pointer[lastState]
}

type lastState struct {
	cs fwk.CycleState
	st *cycleState
}

var (
	_ fwk.PreFilterPlugin     = &InstanceIsolation{}
	_ fwk.FilterPlugin        = &InstanceIsolation{}
	_ fwk.PreFilterExtensions = &InstanceIsolation{}
	_ fwk.PreScorePlugin      = &InstanceIsolation{}
	_ fwk.ScorePlugin         = &InstanceIsolation{}
	_ fwk.ReservePlugin       = &InstanceIsolation{}
	_ fwk.EnqueueExtensions   = &InstanceIsolation{}
	// why: on k8s >= 1.35 one Filter/Score plugin without SignPlugin turns opportunistic
	// batching off for every pod of the profile.
	_ fwk.SignPlugin = &InstanceIsolation{}

	_ fwkruntime.PluginFactory = New
)

// New is the registry factory: it parses the args and hooks the index on the scheduler's own
// pod informer, so the index sees exactly the pods the scheduler's cache sees.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	pl := NewWithIndex(ctx, args, NewIndex(), NewGrants())
	pl.FollowGrants()
	if err := watchClasses(ctx, h, pl.cls.Grants(), pl.logger); err != nil {
		return nil, err
	}
	if f := h.SharedInformerFactory(); f != nil {
		reg, err := f.Core().V1().Pods().Informer().AddEventHandler(pl.PodHandler())
		if err != nil {
			return nil, fmt.Errorf("%s: pod informer: %w", Name, err)
		}
		pl.synced = reg.HasSynced
	}
	return pl, nil
}

// NewWithIndex builds the plugin on an index its caller feeds through PodHandler (tests,
// benchmarks) and on grants its caller feeds from the InstanceClasses (nil:
// none, every class is its pods' namespace's). args must come from ParseArgs.
func NewWithIndex(ctx context.Context, args *Args, ix *Index, grants *Grants) *InstanceIsolation {
	pl := &InstanceIsolation{
		args: args, cls: classrule.NewClassifier(args, grants), index: ix,
		strict: *args.Strict, spread: *args.SpreadReplicas,
		logger: klog.FromContext(ctx).WithName(Name),
	}
	return pl
}

// FollowGrants re-keys the index's pods whenever an InstanceClass changes: a grant changes
// which pods are one class, and the index must count them anew. Call it once, for a plugin
// whose index is fed (New does; a plugin with an empty index needs not).
func (pl *InstanceIsolation) FollowGrants() {
	if g := pl.cls.Grants(); g != nil {
		g.Subscribe(func(value string) { pl.index.rekey(pl.cls, value) })
	}
}

// Name returns the plugin name.
func (pl *InstanceIsolation) Name() string { return Name }

// Index is the plugin's per-node class index.
func (pl *InstanceIsolation) Index() *Index { return pl.index }

// PodHandler feeds the index from pod events: a pod counts on its node from the moment it is
// bound (by any scheduler, or created with spec.nodeName) until it is deleted or terminates.
func (pl *InstanceIsolation) PodHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { pl.onPod(obj) },
		UpdateFunc: func(_, obj any) { pl.onPod(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				pl.index.remove(p.UID, "")
			}
		},
	}
}

func (pl *InstanceIsolation) onPod(obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	switch {
	case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed:
		// why: the scheduler's informer already filters these out (they arrive as deletes);
		// an informer without that selector must not keep them counted either.
		pl.index.remove(p.UID, "")
	case p.Spec.NodeName != "":
		pc := pl.cls.Classify(p)
		pl.index.set(p.UID, p.Spec.NodeName, &pc, false)
	}
	// Unbound pods are ignored: a Reserve-d pod stays counted until Unreserve or deletion.
}

// cycleState is the incoming pod's class and what nominated pods (added) and preemption
// victims (removed) change on each node during this cycle.
type cycleState struct {
	pc    classrule.PodClass
	delta map[string]*classrule.Counts
	// classNodes (when scoreSet) is the index's set of nodes holding the pod's class, read
	// once at PreScore: Score, run once per scored node, checks it without the index's lock.
	classNodes map[string]struct{}
	scoreSet   bool
}

// Clone copies the delta: the framework clones the state before adding nominated pods.
func (c *cycleState) Clone() fwk.StateData {
	out := &cycleState{pc: c.pc, classNodes: c.classNodes, scoreSet: c.scoreSet}
	if len(c.delta) > 0 {
		out.delta = make(map[string]*classrule.Counts, len(c.delta))
		for k, v := range c.delta {
			out.delta[k] = v.Clone()
		}
	}
	return out
}

func (pl *InstanceIsolation) waitSynced(ctx context.Context) {
	if pl.synced == nil || pl.syncedOnce.Load() {
		return
	}
	// why: before the InstanceClasses are listed every class is its namespace's, which would
	// place a shared class's first pods apart for no reason (never together wrongly).
	synced := func() bool { return pl.synced() && pl.cls.Grants().HasSynced() }
	if !synced() {
		wctx, cancel := context.WithTimeout(ctx, syncTimeout)
		defer cancel()
		if !cache.WaitForCacheSync(wctx.Done(), synced) {
			// why: the wait is bounded once, not per cycle: an InstanceClass informer that
			// cannot list (no CRD, no RBAC) must not stall every pod by syncTimeout.
			pl.logger.Error(nil, "Pod handler or InstanceClass informer did not sync in time; isolation decisions may miss pods or shared classes until they do", "timeout", syncTimeout)
		}
	}
	pl.syncedOnce.Store(true)
}

// participates says whether Filter has anything to check for pc.
func (pl *InstanceIsolation) participates(pc *classrule.PodClass) bool {
	return pc.Participates(pl.strict)
}

// PreFilter classifies the pod once per cycle. A pod with conflicting class labels is refused
// outright; an exempt pod, and an unclassed one outside strict mode, skips Filter. When the
// pod may use fewer than maxNodeSet nodes, it returns them, so the framework filters and
// scores only those instead of refusing every other node one by one (see allowedNodes).
func (pl *InstanceIsolation) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	pl.waitSynced(ctx)
	pc := pl.cls.Classify(pod)
	if pc.Conflict != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, pc.Conflict)
	}
	if !pl.participates(&pc) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.writeState(cs, &cycleState{pc: pc})
	if set := pl.index.allowedNodes(nodes, pod, &pc, pl.strict, pl.spread); set != nil {
		return &fwk.PreFilterResult{NodeNames: set}, nil
	}
	// why: with the autoscaler marker's terms, NodeAffinity refuses the nodes marked for other
	// classes before Filter runs, and the event would only say "didn't match Pod's node
	// affinity/selector"; when no node is left for the class, say so, naming it (noroom.go).
	if msg := pl.index.noRoomFor(nodes, pod, &pc, pl.strict, pl.spread); msg != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	return nil, nil
}

// PreFilterExtensions keeps nominated pods and preemption victims in the cycle's view.
func (pl *InstanceIsolation) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

func (pl *InstanceIsolation) adjust(cs fwk.CycleState, other *v1.Pod, nodeInfo fwk.NodeInfo, n int) *fwk.Status {
	st, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	opc := pl.cls.Classify(other)
	if st.delta == nil {
		st.delta = map[string]*classrule.Counts{}
	}
	d := st.delta[node.Name]
	if d == nil {
		d = &classrule.Counts{}
		st.delta[node.Name] = d
	}
	d.AddPod(&opc, n)
	return nil
}

// AddPod counts a nominated pod on nodeInfo for this cycle.
func (pl *InstanceIsolation) AddPod(_ context.Context, cs fwk.CycleState, _ *v1.Pod, pi fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	return pl.adjust(cs, pi.GetPod(), nodeInfo, 1)
}

// RemovePod discounts a pod (a preemption victim) from nodeInfo for this cycle.
func (pl *InstanceIsolation) RemovePod(_ context.Context, cs fwk.CycleState, _ *v1.Pod, pi fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	return pl.adjust(cs, pi.GetPod(), nodeInfo, -1)
}

// writeState stores st in cs and remembers the pair for state.
func (pl *InstanceIsolation) writeState(cs fwk.CycleState, st *cycleState) {
	cs.Write(stateKey, st)
	pl.last.Store(&lastState{cs: cs, st: st})
}

// state is the cycle's state in cs: the one last written when cs is the CycleState it went
// into, else read from cs (a clone the framework made to add nominated pods or try
// preemption holds its own copy).
func (pl *InstanceIsolation) state(cs fwk.CycleState) (*cycleState, error) {
	if l := pl.last.Load(); l != nil && l.cs == cs {
		return l.st, nil
	}
	return readState(cs)
}

func readState(cs fwk.CycleState) (*cycleState, error) {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("%s: reading cycle state: %w", Name, err)
	}
	st, ok := d.(*cycleState)
	if !ok {
		return nil, fmt.Errorf("%s: cycle state has type %T", Name, d)
	}
	return st, nil
}

// Filter refuses a node holding another class (or, strict, unclassed pods; or, spreading, a
// replica of the same controller). UnschedulableAndUnresolvable: preemption is not asked to
// evict another tenant's pods to make room; see README.
func (pl *InstanceIsolation) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	st, err := pl.state(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	pods := nodeInfo.GetPods()
	if len(pods) == 0 && len(st.delta) == 0 {
		// why: a node without pods admits every pod whatever the index says (it agrees, or
		// the snapshot decides, and an empty snapshot refuses nothing), so no lookup.
		return nil
	}
	reason, ok := pl.index.verdictIfPods(node.Name, st.delta[node.Name], len(pods), &st.pc, pl.strict, pl.spread)
	if !ok {
		// why: the snapshot holds pods the index does not (yet), e.g. a pod another profile
		// of this scheduler has just reserved (each profile has its own index) or a binding
		// the index has not seen. The NodeInfo, which already includes this cycle's nominated
		// pods and excludes its victims, decides; this costs O(pods on the node) on such a
		// node only.
		var c classrule.Counts
		for _, pi := range pods {
			pc := pl.cls.Classify(pi.GetPod())
			c.AddPod(&pc, 1)
		}
		reason = classrule.Verdict(classrule.View{Base: &c}, &st.pc, pl.strict, pl.spread)
	}
	if reason != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason)
	}
	return nil
}

// PreScore skips Score for exempt pods and reads, for a classed pod, the nodes holding its
// class.
func (pl *InstanceIsolation) PreScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	st, err := readState(cs)
	if err != nil || st.pc.Exempt {
		pc := pl.cls.Classify(pod)
		if pc.Exempt || pc.Conflict != "" {
			return fwk.NewStatus(fwk.Skip)
		}
		st = &cycleState{pc: pc}
		pl.writeState(cs, st)
	}
	if cl := st.pc.Class(); cl != "" {
		st.classNodes, st.scoreSet = pl.index.nodesOf(cl), true
	}
	return nil
}

// Score packs classes: 100 on a node already holding the pod's class (a classed pod) or no
// class at all (an unclassed pod), 0 elsewhere, so a class fills its nodes before claiming an
// empty one and unclassed pods leave empty nodes to the classes.
func (pl *InstanceIsolation) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	st, err := pl.state(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	if st.scoreSet {
		if _, ok := st.classNodes[node.Name]; ok {
			return fwk.MaxNodeScore, nil
		}
		return 0, nil
	}
	if pl.index.holds(node.Name, st.pc.Class()) {
		return fwk.MaxNodeScore, nil
	}
	return 0, nil
}

// ScoreExtensions is nil: scores are already 0..100.
func (pl *InstanceIsolation) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve counts the pod on its node at once, so the next cycle sees it before the binding.
func (pl *InstanceIsolation) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	pc := pl.cls.Classify(pod)
	pl.index.set(pod.UID, nodeName, &pc, true)
	return nil
}

// Unreserve drops a placement that did not happen (a failed bind or a later plugin's
// refusal); idempotent, and a no-op once the informer has seen the pod bound.
func (pl *InstanceIsolation) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.index.remove(pod.UID, nodeName)
}

// signature is the part of a pod Filter and Score depend on.
type signature struct {
	Exempt  bool     `json:"exempt,omitempty"`
	Classes []string `json:"classes,omitempty"`
	Owner   string   `json:"owner,omitempty"`
}

// SignPod returns the pod's exemption, classes and (spreading) controller, so pods that
// filter and score alike share a signature.
func (pl *InstanceIsolation) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	pc := pl.cls.Classify(pod)
	s := signature{Exempt: pc.Exempt, Classes: pc.Classes}
	if pl.spread {
		s.Owner = string(pc.Owner)
	}
	return []fwk.SignFragment{{Key: SignerName, Value: s}}, nil
}
