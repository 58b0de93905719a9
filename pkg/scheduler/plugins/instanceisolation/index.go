package instanceisolation

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"
)

// MirrorPodAnnotation marks a static pod's mirror (kubelet's kubetypes.ConfigMirrorAnnotationKey).
const MirrorPodAnnotation = "kubernetes.io/config.mirror"

// podClass is what the plugin needs to know about a pod.
type podClass struct {
	// exempt pods neither count on a node nor are filtered.
	exempt bool
	// classes are the effective classes (Grants.Effective: "<namespace>/<value>" or "<value>
	// (shared)") of the distinct non-empty values of the pod's class labels, sorted. Empty:
	// the pod has no class. More than one: conflict says why the pod is refused; placed
	// elsewhere (by another scheduler) it counts under each of them, which keeps every other
	// class off its node. Computed once per pod, so Filter compares keys only.
	classes  []string
	conflict string
	// ns and values (the raw label values, in classes' order before sorting) let the index
	// re-key the pod when an InstanceClass changes.
	ns     string
	values []string
	// owner is the UID of the controller owner reference (spreadReplicas), ownerRef its
	// Kind/name for messages.
	owner    types.UID
	ownerRef string
}

func (pc *podClass) class() string {
	if len(pc.classes) == 0 {
		return ""
	}
	return pc.classes[0]
}

// classifier turns pods into podClass under one profile's args.
type classifier struct {
	keys     []string
	exemptNS map[string]bool
	exemptLS labels.Selector
	grants   *Grants
}

func newClassifier(a *Args, g *Grants) *classifier {
	c := &classifier{keys: a.ClassLabels, exemptNS: map[string]bool{}, exemptLS: exemptSelector(a), grants: g}
	for _, ns := range a.ExemptNamespaces {
		c.exemptNS[ns] = true
	}
	return c
}

func (c *classifier) isExempt(pod *v1.Pod) bool {
	if _, ok := pod.Annotations[MirrorPodAnnotation]; ok {
		return true
	}
	for _, o := range pod.OwnerReferences {
		// why: any DaemonSet reference, controller or not, as IPP does: node daemons run on
		// every node whatever its class.
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	if c.exemptNS[pod.Namespace] {
		return true
	}
	return c.exemptLS != nil && c.exemptLS.Matches(labels.Set(pod.Labels))
}

func (c *classifier) classify(pod *v1.Pod) podClass {
	if c.isExempt(pod) {
		return podClass{exempt: true}
	}
	var pc podClass
	var found []string
	for _, k := range c.keys {
		v, ok := pod.Labels[k]
		// why: IPP leaves a pod with an empty ipp-class alone; an empty value is no class.
		if !ok || v == "" {
			continue
		}
		found = append(found, k+"="+v)
		dup := false
		for _, have := range pc.values {
			dup = dup || have == v
		}
		if !dup {
			pc.values = append(pc.values, v)
		}
	}
	if len(pc.values) > 0 {
		pc.ns = pod.Namespace
		pc.classes = c.effective(pod.Namespace, pc.values)
	}
	if len(pc.classes) > 1 {
		pc.conflict = "pod carries conflicting instance classes: " + strings.Join(found, ", ")
		sort.Strings(pc.classes)
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		pc.owner = ref.UID
		pc.ownerRef = ref.Kind + "/" + ref.Name
	}
	return pc
}

// effective maps raw class values of a pod of namespace ns to their effective classes.
func (c *classifier) effective(ns string, values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = c.grants.Effective(ns, v)
	}
	if len(out) > 1 {
		sort.Strings(out)
	}
	return out
}

// counts is what one node holds (or, in a cycle's delta, what nominated or preemption-removed
// pods add or take away): non-exempt pods by class, unclassed pods, classed pods by
// controller, and every pod including exempt ones (pods; the guard against the snapshot).
type counts struct {
	classes   map[string]int
	unclassed int
	owners    map[types.UID]int
	pods      int
	// sole is the class when the node holds exactly one, soleMsg the refusal naming it; both
	// are rewritten only when the set of classes changes, so the common refusal (a node of one
	// other class) ranges no map and builds no string.
	sole, soleMsg string
}

// addPod counts one pod (n = 1) or discounts it (n = -1).
func (c *counts) addPod(pc *podClass, n int) {
	c.pods += n
	if !pc.exempt {
		c.add(pc.classes, pc.owner, n)
	}
}

func (c *counts) add(classes []string, owner types.UID, n int) {
	if len(classes) == 0 {
		c.unclassed += n
		return
	}
	if c.classes == nil {
		c.classes = map[string]int{}
	}
	keys := len(c.classes)
	changed := false
	for _, cl := range classes {
		before := c.classes[cl]
		c.classes[cl] += n
		if c.classes[cl] == 0 {
			delete(c.classes, cl)
		}
		changed = changed || (before == 0) != (c.classes[cl] == 0)
	}
	if changed || keys != len(c.classes) {
		c.sole, c.soleMsg = "", ""
		if len(c.classes) == 1 {
			for cl := range c.classes {
				c.sole, c.soleMsg = cl, refusalMsg(cl)
			}
		}
	}
	if owner != "" {
		if c.owners == nil {
			c.owners = map[types.UID]int{}
		}
		c.owners[owner] += n
		if c.owners[owner] == 0 {
			delete(c.owners, owner)
		}
	}
}

func (c *counts) empty() bool {
	return c.pods == 0 && c.unclassed == 0 && len(c.classes) == 0 && len(c.owners) == 0
}

func (c *counts) clone() *counts {
	if c == nil {
		return nil
	}
	out := &counts{unclassed: c.unclassed, pods: c.pods, sole: c.sole, soleMsg: c.soleMsg}
	if c.classes != nil {
		out.classes = make(map[string]int, len(c.classes))
		for k, v := range c.classes {
			out.classes[k] = v
		}
	}
	if c.owners != nil {
		out.owners = make(map[types.UID]int, len(c.owners))
		for k, v := range c.owners {
			out.owners[k] = v
		}
	}
	return out
}

// view is a node's counts plus a cycle's delta; both may be nil.
type view struct{ base, delta *counts }

func (v view) class(cl string) int {
	n := 0
	if v.base != nil {
		n += v.base.classes[cl]
	}
	if v.delta != nil {
		n += v.delta.classes[cl]
	}
	return n
}

func (v view) unclassed() int {
	n := 0
	if v.base != nil {
		n += v.base.unclassed
	}
	if v.delta != nil {
		n += v.delta.unclassed
	}
	return n
}

func (v view) owner(uid types.UID) int {
	n := 0
	if v.base != nil {
		n += v.base.owners[uid]
	}
	if v.delta != nil {
		n += v.delta.owners[uid]
	}
	return n
}

// otherClass is the smallest class present other than mine ("": none). The loop is over the
// classes on the node (one, while isolation holds), never over its pods.
func (v view) otherClass(mine string) string {
	if v.delta == nil {
		// why: nearly every Filter sees a node without a cycle delta and with at most one
		// class; ranging over a map costs more than the rest of the verdict.
		if v.base == nil || len(v.base.classes) == 0 {
			return ""
		}
		if len(v.base.classes) == 1 {
			if v.base.sole == mine {
				return ""
			}
			return v.base.sole
		}
	}
	best := ""
	consider := func(m map[string]int) {
		for cl := range m {
			if cl != mine && v.class(cl) > 0 && (best == "" || cl < best) {
				best = cl
			}
		}
	}
	if v.base != nil {
		consider(v.base.classes)
	}
	if v.delta != nil {
		consider(v.delta.classes)
	}
	return best
}

// verdict is "" when pc may run on a node with view v, else the reason it may not.
func verdict(v view, pc *podClass, strict, spread bool) string {
	mine := pc.class()
	if mine == "" {
		if strict {
			if other := v.otherClass(""); other != "" {
				return fmt.Sprintf("node holds instance class %s (strict: pods without a class stay off classed nodes)", other)
			}
		}
		return ""
	}
	if other := v.otherClass(mine); other != "" {
		if v.delta == nil && other == v.base.sole {
			return v.base.soleMsg
		}
		return refusalMsg(other)
	}
	if strict {
		if n := v.unclassed(); n > 0 {
			return fmt.Sprintf("node holds %d pod(s) without an instance class (strict)", n)
		}
	}
	if spread && pc.owner != "" && v.owner(pc.owner) > 0 {
		return fmt.Sprintf("node already holds a replica of %s (spreadReplicas)", pc.ownerRef)
	}
	return ""
}

func refusalMsg(other string) string { return "node holds instance class " + other }

type podEntry struct {
	node string
	pc   podClass
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
	nodes map[string]*counts
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
	return &Index{pods: map[types.UID]*podEntry{}, nodes: map[string]*counts{}, classNodes: map[string]map[string]struct{}{}, soleNodes: map[string]int{}}
}

// set records pod uid with class pc on node. Exempt pods are recorded too: they count only in
// the node's pod total, which Filter compares with the snapshot.
func (ix *Index) set(uid types.UID, node string, pc *podClass, assumed bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if node == "" {
		ix.removeLocked(uid)
		return
	}
	if pe := ix.pods[uid]; pe != nil {
		if pe.node == node && pe.pc.exempt == pc.exempt && pe.pc.owner == pc.owner && equalStrings(pe.pc.classes, pc.classes) {
			// why: a Reserve after the informer saw the binding (or a resync) must not turn a
			// confirmed pod back into one Unreserve could remove.
			pe.assumed = pe.assumed && assumed
			return
		}
		ix.removeLocked(uid)
	}
	pe := &podEntry{node: node, pc: podClass{exempt: pc.exempt, classes: pc.classes, owner: pc.owner, ownerRef: pc.ownerRef, ns: pc.ns, values: pc.values}, assumed: assumed}
	ix.pods[uid] = pe
	c := ix.nodes[node]
	if c == nil {
		c = &counts{}
		ix.nodes[node] = c
	}
	ix.addLocked(node, c, &pe.pc, 1)
}

// addLocked counts pc on node's counts c (n = ±1) and keeps classNodes in step.
func (ix *Index) addLocked(node string, c *counts, pc *podClass, n int) {
	wasClassed, wasSole := len(c.classes) > 0, c.sole
	c.addPod(pc, n)
	if pc.exempt {
		return
	}
	if isClassed := len(c.classes) > 0; isClassed != wasClassed {
		if isClassed {
			ix.classed++
		} else {
			ix.classed--
		}
	}
	if c.sole != wasSole {
		if wasSole != "" {
			if ix.soleNodes[wasSole]--; ix.soleNodes[wasSole] == 0 {
				delete(ix.soleNodes, wasSole)
			}
		}
		if c.sole != "" {
			ix.soleNodes[c.sole]++
		}
	}
	for _, cl := range pc.classes {
		holds := c.classes[cl] > 0
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
func (ix *Index) rekey(cls *classifier, value string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, pe := range ix.pods {
		if pe.pc.exempt || !slices.Contains(pe.pc.values, value) {
			continue
		}
		next := cls.effective(pe.pc.ns, pe.pc.values)
		if equalStrings(next, pe.pc.classes) {
			continue
		}
		c := ix.nodes[pe.node]
		ix.addLocked(pe.node, c, &pe.pc, -1)
		pe.pc.classes = next
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
		if c.empty() {
			delete(ix.nodes, pe.node)
		}
	}
}

// verdict is "" when pc may run on node (with a cycle's delta), else the reason.
func (ix *Index) verdict(node string, delta *counts, pc *podClass, strict, spread bool) string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return verdict(view{base: ix.nodes[node], delta: delta}, pc, strict, spread)
}

// verdictIfPods is verdict when the index (plus delta) holds exactly wantPods pods on node;
// ok is false otherwise, and the caller must decide from the snapshot's pods.
func (ix *Index) verdictIfPods(node string, delta *counts, wantPods int, pc *podClass, strict, spread bool) (reason string, ok bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	base := ix.nodes[node]
	have := 0
	if base != nil {
		have += base.pods
	}
	if delta != nil {
		have += delta.pods
	}
	if have != wantPods {
		return "", false
	}
	return verdict(view{base: base, delta: delta}, pc, strict, spread), true
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
func (ix *Index) allowedNodes(nodes []fwk.NodeInfo, pod *v1.Pod, pc *podClass, strict, spread bool) sets.Set[string] {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	// why: an O(1) estimate first, so a cycle with many usable nodes (the common case) does
	// not range over every node. Refused by the index are at least the nodes holding a class
	// other than the pod's (for a pod without a class, strict: any class).
	refused := ix.classed
	if cl := pc.class(); cl != "" {
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
			if c := ix.nodes[node.Name]; c != nil && c.pods == np && verdict(view{base: c}, pc, strict, spread) != "" {
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
func (ix *Index) noRoomFor(nodes []fwk.NodeInfo, pod *v1.Pod, pc *podClass, strict, spread bool) string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	refused := ix.classed
	if cl := pc.class(); cl != "" {
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
		return c == nil || len(c.classes) == 0
	}
	return c != nil && c.classes[cl] > 0
}

// NodeSummary is a node's counts, for tests and diagnostics. Pods counts every pod,
// exempt ones included.
type NodeSummary struct {
	Classes   map[string]int
	Unclassed int
	Owners    map[types.UID]int
	Pods      int
}

// Summary copies the whole index (tests, debugging; O(nodes)).
func (ix *Index) Summary() map[string]NodeSummary {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make(map[string]NodeSummary, len(ix.nodes))
	for n, c := range ix.nodes {
		cc := c.clone()
		out[n] = NodeSummary{Classes: cc.classes, Unclassed: cc.unclassed, Owners: cc.owners, Pods: cc.pods}
	}
	return out
}

// Assumed counts the placements not yet confirmed by the informer.
func (ix *Index) Assumed() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := 0
	for _, pe := range ix.pods {
		if pe.assumed && !pe.pc.exempt {
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
