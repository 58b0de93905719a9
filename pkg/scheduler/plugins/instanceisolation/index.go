package instanceisolation

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/isolation/classrule"
)

// MirrorPodAnnotation marks a static pod's mirror (kubelet's kubetypes.ConfigMirrorAnnotationKey).
const MirrorPodAnnotation = classrule.MirrorPodAnnotation

type podEntry struct {
	node string
	pc   classrule.PodClass
	// assumed: placed by this scheduler (Reserve) and not yet seen bound by the informer.
	assumed bool
}

// Index is one plugin instance's per-node class counts: every pod bound to a node
// (from the scheduler's pod informer, which already leaves out Succeeded and Failed pods) plus
// the pods this scheduler has reserved but not yet bound. Writers are informer handlers and
// Reserve/Unreserve; readers are Filter, Score and queueing hints, each an O(1) map lookup by
// node name.
type Index struct {
	mu    sync.RWMutex
	pods  map[types.UID]*podEntry
	nodes map[string]*classrule.Counts
	// classNodes is, per class, the set of nodes holding at least one of its pods. A set is
	// never modified once stored (a change stores a copy), so a cycle can keep the one it read
	// and Score checks it without the lock.
	classNodes map[string]map[string]struct{}
	// classed counts the nodes holding any class, soleNodes per class the nodes holding that
	// class only: PreFilter's O(1) estimate of how many nodes a class may still use.
	classed   int
	soleNodes map[string]int
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{pods: map[types.UID]*podEntry{}, nodes: map[string]*classrule.Counts{}, classNodes: map[string]map[string]struct{}{}, soleNodes: map[string]int{}}
}

// set records pod uid with class pc on node. Exempt pods are recorded too: they count only in
// the node's pod total, which Filter compares with the snapshot.
func (ix *Index) set(uid types.UID, node string, pc *classrule.PodClass, assumed bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if node == "" {
		ix.removeLocked(uid)
		return
	}
	if pe := ix.pods[uid]; pe != nil {
		if pe.node == node && pe.pc.Exempt == pc.Exempt && pe.pc.Owner == pc.Owner && equalStrings(pe.pc.Classes, pc.Classes) {
			// why: a Reserve after the informer saw the binding (or a resync) must not turn a
			// confirmed pod back into one Unreserve could remove.
			pe.assumed = pe.assumed && assumed
			return
		}
		ix.removeLocked(uid)
	}
	pe := &podEntry{node: node, pc: classrule.PodClass{Exempt: pc.Exempt, Classes: pc.Classes, Owner: pc.Owner, OwnerRef: pc.OwnerRef, NS: pc.NS, Values: pc.Values}, assumed: assumed}
	ix.pods[uid] = pe
	c := ix.nodes[node]
	if c == nil {
		c = &classrule.Counts{}
		ix.nodes[node] = c
	}
	ix.addLocked(node, c, &pe.pc, 1)
}

// addLocked counts pc on node's counts c (n = ±1) and keeps classNodes in step.
func (ix *Index) addLocked(node string, c *classrule.Counts, pc *classrule.PodClass, n int) {
	wasClassed, wasSole := c.Classed(), c.Sole()
	c.AddPod(pc, n)
	if pc.Exempt {
		return
	}
	if isClassed := c.Classed(); isClassed != wasClassed {
		if isClassed {
			ix.classed++
		} else {
			ix.classed--
		}
	}
	if sole := c.Sole(); sole != wasSole {
		if wasSole != "" {
			if ix.soleNodes[wasSole]--; ix.soleNodes[wasSole] == 0 {
				delete(ix.soleNodes, wasSole)
			}
		}
		if sole != "" {
			ix.soleNodes[sole]++
		}
	}
	for _, cl := range pc.Classes {
		holds := c.Class(cl) > 0
		set := ix.classNodes[cl]
		if _, had := set[node]; had == holds {
			continue
		}
		next := make(map[string]struct{}, len(set)+1)
		for k := range set {
			if k != node {
				next[k] = struct{}{}
			}
		}
		if holds {
			next[node] = struct{}{}
		}
		if len(next) == 0 {
			delete(ix.classNodes, cl)
		} else {
			ix.classNodes[cl] = next
		}
	}
}

// rekey recomputes the effective classes of the pods carrying class value after its
// InstanceClass changed (created, its namespaces edited, deleted). O(pods in the index), on
// an administrator's rare change, never in a scheduling cycle.
func (ix *Index) rekey(cls *classrule.Classifier, value string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, pe := range ix.pods {
		if pe.pc.Exempt || !slices.Contains(pe.pc.Values, value) {
			continue
		}
		next := cls.Effective(pe.pc.NS, pe.pc.Values)
		if equalStrings(next, pe.pc.Classes) {
			continue
		}
		c := ix.nodes[pe.node]
		ix.addLocked(pe.node, c, &pe.pc, -1)
		pe.pc.Classes = next
		ix.addLocked(pe.node, c, &pe.pc, 1)
	}
}

// nodesOf is the set of nodes holding class cl, never modified afterwards: read it, do not
// write it.
func (ix *Index) nodesOf(cl string) map[string]struct{} {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.classNodes[cl]
}

// remove forgets uid. With onlyAssumedOn set, only an unconfirmed placement on that node is
// removed, which makes Unreserve idempotent and harmless after the informer has caught up.
func (ix *Index) remove(uid types.UID, onlyAssumedOn string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if onlyAssumedOn != "" {
		pe := ix.pods[uid]
		if pe == nil || !pe.assumed || pe.node != onlyAssumedOn {
			return
		}
	}
	ix.removeLocked(uid)
}

func (ix *Index) removeLocked(uid types.UID) {
	pe := ix.pods[uid]
	if pe == nil {
		return
	}
	delete(ix.pods, uid)
	if c := ix.nodes[pe.node]; c != nil {
		ix.addLocked(pe.node, c, &pe.pc, -1)
		if c.Empty() {
			delete(ix.nodes, pe.node)
		}
	}
}

// verdict is "" when pc may run on node (with a cycle's delta), else the reason.
func (ix *Index) verdict(node string, delta *classrule.Counts, pc *classrule.PodClass, strict, spread bool) string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return classrule.Verdict(classrule.View{Base: ix.nodes[node], Delta: delta}, pc, strict, spread)
}

// verdictIfPods is verdict when the index (plus delta) holds exactly wantPods pods on node;
// ok is false otherwise, and the caller must decide from the snapshot's pods.
func (ix *Index) verdictIfPods(node string, delta *classrule.Counts, wantPods int, pc *classrule.PodClass, strict, spread bool) (reason string, ok bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	base := ix.nodes[node]
	have := 0
	if base != nil {
		have += base.Pods()
	}
	if delta != nil {
		have += delta.Pods()
	}
	if have != wantPods {
		return "", false
	}
	return classrule.Verdict(classrule.View{Base: base, Delta: delta}, pc, strict, spread), true
}

// maxNodeSet is the largest PreFilterResult allowedNodes returns: the scheduler's
// minFeasibleNodesToFind. With fewer nodes than that the framework filters every node it is
// given, and without the result it would look for at least that many feasible nodes, more
// than the set holds, so it filters every node too: both ways the feasible nodes are the same.
const maxNodeSet = 100

// allowedNodes is the set of nodes in nodes that Filter may accept for pc at the start of a
// cycle (no nominated pods or victims counted yet), when it has fewer than maxNodeSet nodes;
// nil otherwise. A node is left out only when the index refuses it and holds exactly the pods
// the snapshot's NodeInfo holds, i.e. when Filter would refuse it by the index too (a
// nominated pod only adds classes, so it refuses with them as well); a node without pods, or
// whose pod total differs from the index's (Filter then decides from its pods), stays in.
//
// The set is also withheld when none of its nodes matches the pod's required node selector or
// affinity: the pod cannot be placed, and without the set its failure names, node by node,
// the class in the way rather than "didn't satisfy plugin InstanceIsolation" for every node
// outside the set. The decision is the same either way.
func (ix *Index) allowedNodes(nodes []fwk.NodeInfo, pod *v1.Pod, pc *classrule.PodClass, strict, spread bool) sets.Set[string] {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	// why: an O(1) estimate first, so a cycle with many usable nodes (the common case) does
	// not range over every node. Refused by the index are at least the nodes holding a class
	// other than the pod's (for a pod without a class, strict: any class).
	refused := ix.classed
	if cl := pc.Class(); cl != "" {
		refused -= ix.soleNodes[cl]
	}
	if len(nodes)-refused >= maxNodeSet {
		return nil
	}
	out := sets.New[string]()
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	matched := false
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		if np := len(ni.GetPods()); np > 0 {
			if c := ix.nodes[node.Name]; c != nil && c.Pods() == np && classrule.Verdict(classrule.View{Base: c}, pc, strict, spread) != "" {
				continue
			}
		}
		out.Insert(node.Name)
		if len(out) >= maxNodeSet {
			return nil
		}
		if !matched {
			// why: an error (a selector that does not parse) counts as a match: NodeAffinity
			// reports it on the nodes of the set.
			ok, err := affinity.Match(node)
			matched = ok || err != nil
		}
	}
	if !matched {
		// why: no node may take the pod (or none at all is left); the full scan gives the pod
		// its per-node reasons ("node holds instance class X").
		return nil
	}
	return out
}

// noRoomFor is noRoom under the index's lock, ranging over nodes only when the O(1) estimate
// says fewer than maxNodeSet nodes are left for the class (as allowedNodes).
func (ix *Index) noRoomFor(nodes []fwk.NodeInfo, pod *v1.Pod, pc *classrule.PodClass, strict, spread bool) string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	refused := ix.classed
	if cl := pc.Class(); cl != "" {
		refused -= ix.soleNodes[cl]
	}
	if len(nodes)-refused >= maxNodeSet {
		return ""
	}
	return ix.noRoom(nodes, pod, pc, strict, spread)
}

// holds says whether node holds pods of class cl ("": whether it holds no classed pod).
func (ix *Index) holds(node, cl string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	c := ix.nodes[node]
	if cl == "" {
		return c == nil || !c.Classed()
	}
	return c != nil && c.Class(cl) > 0
}

// NodeSummary is a node's counts, for tests and diagnostics. Pods counts every pod,
// exempt ones included.
type NodeSummary = classrule.Summary

// Summary copies the whole index (tests, debugging; O(nodes)).
func (ix *Index) Summary() map[string]NodeSummary {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make(map[string]NodeSummary, len(ix.nodes))
	for n, c := range ix.nodes {
		out[n] = c.Summary()
	}
	return out
}

// Assumed counts the placements not yet confirmed by the informer.
func (ix *Index) Assumed() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := 0
	for _, pe := range ix.pods {
		if pe.assumed && !pe.pc.Exempt {
			n++
		}
	}
	return n
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
