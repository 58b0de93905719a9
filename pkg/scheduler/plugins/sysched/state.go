package sysched

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/profiles"
)

const (
	// maxBaseDepth bounds baseProfileName chains; SPO itself has no limit, but real chains are
	// one or two deep and a bound keeps a hostile chain from costing O(profiles) per update.
	maxBaseDepth = 16

	annotationPodSeccomp       = "seccomp.security.alpha.kubernetes.io/pod"
	annotationContainerSeccomp = "container.seccomp.security.alpha.kubernetes.io/"
	localhostPrefix            = "localhost/"
)

type profileEntry struct {
	p   *profiles.Profile
	own bitset
	// resolved = own ∪ own sets along the base chain.
	resolved bitset
	// allowAll: the chain contains a deny-list profile or a base whose content is unknown
	// (missing, oci://, too deep); such profiles expose the full set.
	allowAll bool
	// unknown are the profile's own names Linux has no syscall for.
	unknown []string
}

// podSet is the syscall exposure of one pod plus the profile keys it was derived from, so the
// pod can be recomputed when exactly those profiles change.
type podSet struct {
	set  bitset
	size int
	refs []profiles.Key
	// used are the profiles the set was built from (each reference resolved to one).
	used    []profiles.Key
	missing []string
	// skipped says which bindings that select the pod were skipped, and why.
	skipped  []string
	usesFull bool
	// gen is state.gen when the set was computed; a set carried from PreScore to Reserve is
	// recomputed if any profile or binding changed in between, or the pod would keep a stale set.
	gen uint64
}

type podEntry struct {
	uid       types.UID
	namespace string
	name      string
	node      string
	assumed   bool
	pod       *v1.Pod
	podSet
}

// nodeState keeps per-syscall pod counts so the node union H and Σ|S_q| are maintained
// incrementally and Score never walks the node's pods.
type nodeState struct {
	counts []int32
	h      bitset
	n      int
	sum    int64
	// version moves with every change, so a memoized score can tell it is stale (memo.go).
	version uint64
}

func (ns *nodeState) add(s bitset, size int) {
	s.forEach(func(i int) {
		if i >= len(ns.counts) {
			nc := make([]int32, i+64)
			copy(nc, ns.counts)
			ns.counts = nc
		}
		ns.counts[i]++
		if ns.counts[i] == 1 {
			ns.h.set(i)
		}
	})
	ns.n++
	ns.sum += int64(size)
	ns.version++
}

func (ns *nodeState) remove(s bitset, size int) {
	s.forEach(func(i int) {
		if i < len(ns.counts) && ns.counts[i] > 0 {
			ns.counts[i]--
			if ns.counts[i] == 0 {
				ns.h.clear(i)
			}
		}
	})
	ns.n--
	ns.sum -= int64(size)
	ns.version++
}

// exs is the KEP-399 extraneous-syscall count of placing a pod with set p on this node:
// |H∖P| + Σ_q |(H∪P)∖S_q|. Because every S_q ⊆ H, the sum equals n·|H∪P| − Σ_q|S_q|.
func (ns *nodeState) exs(p bitset) int64 {
	if ns == nil || ns.n == 0 {
		return 0
	}
	andNot, or := countAndNotOr(ns.h, p)
	return int64(andNot) + int64(ns.n)*int64(or) - ns.sum
}

// state is all mutable plugin data of one scheduler profile, guarded by one RWMutex: writers
// are informer handlers and Reserve/Unreserve, readers are PreScore/Score.
type state struct {
	mu     sync.RWMutex
	logger klog.Logger

	fullKeys []profiles.Key

	syscallIdx   map[string]int
	syscallNames []string

	profiles map[profiles.Key]*profileEntry
	byPath   map[string]profiles.Key
	bindings map[string]map[string]*profiles.Binding // namespace → name → binding

	full bitset
	gen  uint64

	pods     map[types.UID]*podEntry
	nodes    map[string]*nodeState
	refPods  map[profiles.Key]map[types.UID]struct{}
	fullPods map[types.UID]struct{}

	// excluded says which pods say nothing about a node (DaemonSet pods, excludedPodSelector):
	// they are never counted on one.
	excluded func(*v1.Pod) bool

	// runtimeDefault is the set of a RuntimeDefault container (nil: the full set), and
	// runtimeDefaultKeys the configured profile that stands for it instead, if any.
	runtimeDefault     *bitset
	runtimeDefaultKeys []profiles.Key
	// unsetIsRuntimeDefault: a container with no profile runs RuntimeDefault (a kubelet with
	// --seccomp-default).
	unsetIsRuntimeDefault bool

	// installed is SPO's per-node install state: profile ID → node → state, from
	// SecurityProfileNodeStatus objects (statusByName, by object name).
	installed    map[string]map[string]string
	statusByName map[string]*profiles.NodeStatus
	// nodeKnown says whether the scheduler knows a node (nil: not checked).
	nodeKnown func(string) bool

	// waiting are the pods refused for a profile not installed (requeue.go); freed is told,
	// outside the lock, the profile IDs a change of the install states may let them use.
	waiting *waiting
	freed   func(ids []string)
}

func newState(logger klog.Logger, args *Args) *state {
	var sel labels.Selector
	if args.ExcludedPodSelector != nil {
		// Validated by ParseArgs; an error here leaves the selector out rather than
		// excluding every pod.
		sel, _ = metav1.LabelSelectorAsSelector(args.ExcludedPodSelector)
	}
	excludeDS := args.DaemonSetPods != DaemonSetPodsCount
	st := &state{
		excluded: func(p *v1.Pod) bool {
			if excludeDS && ownedByDaemonSet(p) {
				return true
			}
			return sel != nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels))
		},
		logger: logger,
		fullKeys: []profiles.Key{
			{Namespace: args.DefaultProfileNamespace, Name: args.DefaultProfileName},
			{Name: args.DefaultProfileName},
		},
		syscallIdx: map[string]int{},
		profiles:   map[profiles.Key]*profileEntry{},
		byPath:     map[string]profiles.Key{},
		bindings:   map[string]map[string]*profiles.Binding{},
		pods:       map[types.UID]*podEntry{},
		nodes:      map[string]*nodeState{},
		waiting:    newWaiting(),
		refPods:    map[profiles.Key]map[types.UID]struct{}{},
		fullPods:   map[types.UID]struct{}{},

		unsetIsRuntimeDefault: args.UnsetProfile == UnsetRuntimeDefault,
		installed:             map[string]map[string]string{},
		statusByName:          map[string]*profiles.NodeStatus{},
	}
	switch {
	case args.RuntimeDefaultProfileName != "":
		st.runtimeDefaultKeys = []profiles.Key{{Namespace: args.DefaultProfileNamespace, Name: args.RuntimeDefaultProfileName}, {Name: args.RuntimeDefaultProfileName}}
	case args.RuntimeDefault != RuntimeDefaultFull:
		d, err := profiles.ContainerdDefault()
		if err != nil {
			// Shipped with the binary and tested: unreachable, but never a reason not to
			// schedule; the full set is the conservative answer.
			logger.Error(err, "RuntimeDefault data unreadable; counting RuntimeDefault as the full profile")
			break
		}
		var b bitset
		for _, n := range d.Syscalls {
			b.set(st.intern(n))
		}
		st.runtimeDefault = &b
	}
	return st
}

func (s *state) intern(name string) int {
	if i, ok := s.syscallIdx[name]; ok {
		return i
	}
	i := len(s.syscallNames)
	s.syscallIdx[name] = i
	s.syscallNames = append(s.syscallNames, name)
	return i
}

// ---- profiles ----

// upsertProfile stores a parsed profile and propagates the change. Caller must not hold mu.
func (s *state) upsertProfile(p *profiles.Profile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &profileEntry{p: p, unknown: profiles.UnknownSyscalls(p.Syscalls)}
	for _, n := range p.Syscalls {
		e.own.set(s.intern(n))
	}
	if old := s.profiles[p.Key]; old != nil && old.p.LocalhostProfile != "" && s.byPath[old.p.LocalhostProfile] == p.Key {
		delete(s.byPath, old.p.LocalhostProfile)
	}
	s.profiles[p.Key] = e
	if p.LocalhostProfile != "" {
		s.byPath[strings.TrimPrefix(p.LocalhostProfile, localhostPrefix)] = p.Key
	}
	s.profileChangedLocked(p.Key)
}

func (s *state) deleteProfile(k profiles.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.profiles[k]
	if old == nil {
		return
	}
	if lp := strings.TrimPrefix(old.p.LocalhostProfile, localhostPrefix); lp != "" && s.byPath[lp] == k {
		delete(s.byPath, lp)
	}
	delete(s.profiles, k)
	if n := len(s.refPods[k]); n > 0 {
		s.logger.Info("SeccompProfile deleted while pods still reference it; counting them as the full profile", "profile", k.String(), "pods", n)
	}
	s.profileChangedLocked(k)
}

// profileChangedLocked re-resolves k and every profile whose base chain passes through k, then
// recomputes the pods that use any of them, and all full-profile pods if the full set moved.
func (s *state) profileChangedLocked(k profiles.Key) {
	s.gen++
	affected := map[profiles.Key]struct{}{k: {}}
	for key, e := range s.profiles {
		if key != k && s.chainReaches(e, k) {
			affected[key] = struct{}{}
		}
	}
	for key := range affected {
		if e := s.profiles[key]; e != nil {
			s.resolveLocked(e)
		}
	}
	oldFull := s.full
	s.full = s.computeFullLocked()
	uids := map[types.UID]struct{}{}
	for key := range affected {
		for uid := range s.refPods[key] {
			uids[uid] = struct{}{}
		}
	}
	if !oldFull.equal(s.full) {
		for uid := range s.fullPods {
			uids[uid] = struct{}{}
		}
	}
	for uid := range uids {
		s.recomputePodLocked(s.pods[uid])
	}
}

func (s *state) chainReaches(e *profileEntry, k profiles.Key) bool {
	cur := e
	for depth := 0; depth < maxBaseDepth && cur != nil; depth++ {
		bk, ok := cur.p.BaseKey()
		if !ok {
			return false
		}
		if bk == k {
			return true
		}
		cur = s.profiles[bk]
	}
	return false
}

func (s *state) resolveLocked(e *profileEntry) {
	e.resolved = append(bitset(nil), e.own...)
	e.allowAll = e.p.AllowByDefault
	visited := map[profiles.Key]struct{}{e.p.Key: {}}
	cur := e
	for depth := 0; cur.p.HasBase(); depth++ {
		bk, ok := cur.p.BaseKey()
		if !ok {
			s.logger.Info("SeccompProfile base is not a cluster object (e.g. oci://); counting it as the full profile", "profile", e.p.Key.String(), "base", cur.p.BaseProfileName)
			e.allowAll = true
			return
		}
		if _, loop := visited[bk]; loop {
			s.logger.Error(nil, "SeccompProfile baseProfileName cycle; using the union of the profiles in the cycle", "profile", e.p.Key.String(), "base", bk.String())
			return
		}
		if depth >= maxBaseDepth {
			s.logger.Error(nil, "SeccompProfile base chain too deep; counting it as the full profile", "profile", e.p.Key.String(), "maxDepth", maxBaseDepth)
			e.allowAll = true
			return
		}
		base := s.profiles[bk]
		if base == nil {
			s.logger.Info("SeccompProfile base not found; counting it as the full profile", "profile", e.p.Key.String(), "base", bk.String())
			e.allowAll = true
			return
		}
		visited[bk] = struct{}{}
		e.resolved = e.resolved.or(base.own)
		e.allowAll = e.allowAll || base.p.AllowByDefault
		cur = base
	}
}

// computeFullLocked returns the set used for unconfined pods: the configured full profile, or,
// if that is missing or empty, every syscall name any profile mentions (the best available
// approximation of "all syscalls").
func (s *state) computeFullLocked() bitset {
	for _, k := range s.fullKeys {
		if e := s.profiles[k]; e != nil && !e.allowAll && e.resolved.count() > 0 {
			return e.resolved
		}
	}
	var all bitset
	for i := range s.syscallNames {
		all.set(i)
	}
	return all
}

// ---- bindings ----

func (s *state) upsertBinding(b *profiles.Binding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.bindings[b.Namespace]
	if m == nil {
		m = map[string]*profiles.Binding{}
		s.bindings[b.Namespace] = m
	}
	m[b.Name] = b
	s.recomputeNamespaceLocked(b.Namespace)
}

func (s *state) deleteBinding(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.bindings[namespace][name]; !ok {
		return
	}
	delete(s.bindings[namespace], name)
	if len(s.bindings[namespace]) == 0 {
		delete(s.bindings, namespace)
	}
	s.recomputeNamespaceLocked(namespace)
}

func (s *state) recomputeNamespaceLocked(ns string) {
	s.gen++
	for _, pe := range s.pods {
		if pe.namespace == ns {
			s.recomputePodLocked(pe)
		}
	}
}

// ---- pods ----

func (s *state) recomputePodLocked(pe *podEntry) {
	if pe == nil {
		return
	}
	ps := s.computePodSetLocked(pe.pod)
	s.unindexPodLocked(pe)
	node := s.nodes[pe.node]
	if node != nil {
		node.remove(pe.set, pe.size)
	}
	pe.podSet = ps
	if node != nil {
		node.add(pe.set, pe.size)
	}
	s.indexPodLocked(pe)
}

func (s *state) indexPodLocked(pe *podEntry) {
	for _, k := range pe.refs {
		m := s.refPods[k]
		if m == nil {
			m = map[types.UID]struct{}{}
			s.refPods[k] = m
		}
		m[pe.uid] = struct{}{}
	}
	if pe.usesFull {
		s.fullPods[pe.uid] = struct{}{}
	}
}

func (s *state) unindexPodLocked(pe *podEntry) {
	for _, k := range pe.refs {
		if m := s.refPods[k]; m != nil {
			delete(m, pe.uid)
			if len(m) == 0 {
				delete(s.refPods, k)
			}
		}
	}
	delete(s.fullPods, pe.uid)
}

// addPod records pod on node. assumed marks a placement this scheduler made (Reserve) that the
// API server has not confirmed yet. ps may be nil, in which case it is computed here.
func (s *state) addPod(pod *v1.Pod, node string, assumed bool, ps *podSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.excluded(pod) {
		return
	}
	if pe := s.pods[pod.UID]; pe != nil {
		if pe.node == node {
			// Seccomp fields and annotations are immutable after creation, so the set is
			// unchanged; only confirmation state moves.
			pe.assumed = pe.assumed && assumed
			pe.pod = pod
			return
		}
		s.removePodLocked(pe)
	}
	pe := &podEntry{uid: pod.UID, namespace: pod.Namespace, name: pod.Name, node: node, assumed: assumed, pod: pod}
	if ps != nil && ps.gen == s.gen {
		pe.podSet = *ps
	} else {
		pe.podSet = s.computePodSetLocked(pod)
	}
	ns := s.nodes[node]
	if ns == nil {
		ns = &nodeState{}
		s.nodes[node] = ns
	}
	ns.add(pe.set, pe.size)
	s.pods[pod.UID] = pe
	s.indexPodLocked(pe)
}

// removePod forgets uid. With onlyAssumedOn set, only an unconfirmed placement on that node is
// removed, which makes Unreserve idempotent and harmless after the informer has caught up.
func (s *state) removePod(uid types.UID, onlyAssumedOn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pe := s.pods[uid]
	if pe == nil {
		return
	}
	if onlyAssumedOn != "" && (!pe.assumed || pe.node != onlyAssumedOn) {
		return
	}
	s.removePodLocked(pe)
}

func (s *state) removePodLocked(pe *podEntry) {
	s.unindexPodLocked(pe)
	if ns := s.nodes[pe.node]; ns != nil {
		ns.remove(pe.set, pe.size)
		if ns.n == 0 {
			delete(s.nodes, pe.node)
		}
	}
	delete(s.pods, pe.uid)
}

func (s *state) podSet(pod *v1.Pod) podSet {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.computePodSetLocked(pod)
}

func (s *state) score(node string, p bitset) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodes[node].exs(p)
}

// computePodSetLocked derives a pod's syscall set. Every Localhost reference found anywhere on
// the pod (pod and container securityContexts, init and ephemeral containers, all legacy
// annotations, bindings) is unioned; any container whose effective profile is not Localhost
// runs unconfined or with the runtime default, so the full set is added for it.
func (s *state) computePodSetLocked(pod *v1.Pod) podSet {
	b := &podSetBuilder{s: s, pod: pod, refSeen: map[profiles.Key]struct{}{}, missingSeen: map[string]struct{}{}}
	byImage, wildcard := b.bindings()
	ctrs := podContainers(pod)
	// Pod level: securityContext wins over the legacy annotation, as in the kubelet.
	var podLevel seccompLevel
	if pod.Spec.SecurityContext != nil {
		podLevel = levelOfField(pod.Spec.SecurityContext.SeccompProfile)
	}
	if !podLevel.set {
		v, ok := pod.Annotations[annotationPodSeccomp]
		podLevel = levelOfAnnotation(v, ok)
	}
	containerBound := false
	bound := make([]string, len(ctrs))
	for i, c := range ctrs {
		if pn, ok := byImage[c.image]; ok && c.bindable {
			bound[i] = pn
			containerBound = true
		}
	}
	podBinding := ""
	if !containerBound && !podLevel.set && wildcard != "" {
		podBinding = wildcard
	}

	// Union of every Localhost reference on the pod, in a fixed order.
	if podBinding != "" {
		b.addRef(podBinding, b.bindingCands(podBinding))
	} else if podLevel.localhost != "" {
		b.addPath(podLevel.localhost)
	}
	for i, c := range ctrs {
		b.addContainer(c, bound[i], podBinding != "", podLevel)
	}
	b.addLegacyAnnotations()
	ps := b.ps
	if len(ctrs) == 0 && len(ps.refs) == 0 {
		ps.usesFull = true
	}
	if ps.usesFull {
		b.set = b.set.or(s.full)
	}
	ps.set = b.set
	ps.size = b.set.count()
	ps.gen = s.gen
	return ps
}

// podSetBuilder gathers one pod's syscall set under the state's read lock.
type podSetBuilder struct {
	s           *state
	pod         *v1.Pod
	ps          podSet
	set         bitset
	refSeen     map[profiles.Key]struct{}
	missingSeen map[string]struct{}
}

// track records k as a profile the pod refers to (so the pod is recomputed when it changes).
func (b *podSetBuilder) track(k profiles.Key) {
	if _, ok := b.refSeen[k]; !ok {
		b.refSeen[k] = struct{}{}
		b.ps.refs = append(b.ps.refs, k)
	}
}

// addRef adds the first existing profile of cands (label names the reference in messages);
// none existing means the full set, and the reference is reported missing.
func (b *podSetBuilder) addRef(label string, cands []profiles.Key) {
	for _, k := range cands {
		b.track(k)
	}
	for _, k := range cands {
		if e := b.s.profiles[k]; e != nil {
			if e.allowAll {
				b.ps.usesFull = true
			}
			b.set = b.set.or(e.resolved)
			b.ps.used = append(b.ps.used, k)
			if len(e.unknown) > 0 {
				b.ps.skipped = append(b.ps.skipped, fmt.Sprintf("SeccompProfile %s names syscalls Linux does not have (%s); counted as names all the same",
					k.String(), strings.Join(e.unknown, ", ")))
			}
			return
		}
	}
	b.ps.usesFull = true
	if _, ok := b.missingSeen[label]; !ok {
		b.missingSeen[label] = struct{}{}
		b.ps.missing = append(b.ps.missing, label)
	}
}

// addPath adds the profile a Localhost path names; a path that names no profile means the
// full set.
func (b *podSetBuilder) addPath(p string) {
	p = strings.TrimPrefix(strings.TrimSpace(p), localhostPrefix)
	if k, ok := b.s.byPath[p]; ok {
		b.addRef(p, []profiles.Key{k})
		return
	}
	cands := profiles.KeysForPath(p)
	if len(cands) == 0 {
		b.ps.usesFull = true
		return
	}
	b.addRef(p, cands)
}

func (b *podSetBuilder) bindingCands(name string) []profiles.Key {
	return []profiles.Key{{Namespace: b.pod.Namespace, Name: name}, {Name: name}}
}

// bindings applies ProfileBindings as SPO's webhook does: in the order the API lists them (by
// name), a binding whose podSelector does not select the pod is skipped, so is one whose
// profile does not exist (SPO skips it rather than block every pod of the namespace; its keys
// are still tracked, so the pod is recomputed when the profile appears), and among the rest
// the last one for an image, or for "*", wins: SPO v1 overwrites a container's profile with
// each matching binding in turn, and remembers the last "*" as the pod default.
func (b *podSetBuilder) bindings() (byImage map[string]string, wildcard string) {
	byImage = map[string]string{}
	bs := b.s.bindings[b.pod.Namespace]
	if len(bs) == 0 {
		return byImage, ""
	}
	podImages := map[string]bool{}
	for _, cs := range [][]v1.Container{b.pod.Spec.InitContainers, b.pod.Spec.Containers} {
		for _, c := range cs {
			podImages[c.Image] = true
		}
	}
	names := make([]string, 0, len(bs))
	for n := range bs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pb := bs[n]
		if !pb.Matches(b.pod.Labels) || (pb.Image != profiles.SelectAllImages && !podImages[pb.Image]) {
			continue
		}
		exists := false
		for _, k := range b.bindingCands(pb.ProfileName) {
			b.track(k)
			exists = exists || b.s.profiles[k] != nil
		}
		if !exists {
			b.ps.skipped = append(b.ps.skipped, fmt.Sprintf("ProfileBinding %s/%s names SeccompProfile %s, which does not exist; skipped, as SPO does", pb.Namespace, pb.Name, pb.ProfileName))
			continue
		}
		if pb.Image == profiles.SelectAllImages {
			wildcard = pb.ProfileName
		} else {
			byImage[pb.Image] = pb.ProfileName
		}
	}
	return byImage, wildcard
}

// podContainer is one container of any kind, as the seccomp rules see it.
type podContainer struct {
	name, image string
	sc          *v1.SecurityContext
	bindable    bool
}

func podContainers(pod *v1.Pod) []podContainer {
	var ctrs []podContainer
	for _, c := range pod.Spec.InitContainers {
		ctrs = append(ctrs, podContainer{c.Name, c.Image, c.SecurityContext, true})
	}
	for _, c := range pod.Spec.Containers {
		ctrs = append(ctrs, podContainer{c.Name, c.Image, c.SecurityContext, true})
	}
	for _, c := range pod.Spec.EphemeralContainers {
		// SPO's webhook only patches pod creation; ephemeral containers never get bindings.
		ctrs = append(ctrs, podContainer{c.Name, c.Image, c.SecurityContext, false})
	}
	return ctrs
}

// seccompLevel is a seccomp setting at the pod or a container.
type seccompLevel struct {
	set            bool
	localhost      string // "" when set but not Localhost
	runtimeDefault bool
}

func levelOfField(sp *v1.SeccompProfile) seccompLevel {
	if sp == nil {
		return seccompLevel{}
	}
	if sp.Type == v1.SeccompProfileTypeLocalhost && sp.LocalhostProfile != nil {
		return seccompLevel{set: true, localhost: *sp.LocalhostProfile}
	}
	return seccompLevel{set: true, runtimeDefault: sp.Type == v1.SeccompProfileTypeRuntimeDefault}
}

func levelOfAnnotation(v string, ok bool) seccompLevel {
	if !ok {
		return seccompLevel{}
	}
	if strings.HasPrefix(v, localhostPrefix) {
		return seccompLevel{set: true, localhost: strings.TrimPrefix(v, localhostPrefix)}
	}
	return seccompLevel{set: true, runtimeDefault: v == v1.SeccompProfileRuntimeDefault || v == v1.DeprecatedSeccompProfileDockerDefault}
}

// addContainer adds what container c runs with: its binding (bound), else its own setting,
// else the pod's (unless a pod-wide binding covers it: podBound).
func (b *podSetBuilder) addContainer(c podContainer, bound string, podBound bool, podLevel seccompLevel) {
	var eff seccompLevel
	switch {
	case bound != "":
		b.addRef(bound, b.bindingCands(bound))
		return
	case c.sc != nil && c.sc.SeccompProfile != nil:
		eff = levelOfField(c.sc.SeccompProfile)
	default:
		v, ok := b.pod.Annotations[annotationContainerSeccomp+c.name]
		eff = levelOfAnnotation(v, ok)
	}
	if !eff.set {
		if podBound {
			return
		}
		eff = podLevel
	}
	if eff.localhost != "" {
		b.addPath(eff.localhost)
		return
	}
	switch s := b.s; {
	case !eff.runtimeDefault && (eff.set || !s.unsetIsRuntimeDefault):
		b.ps.usesFull = true // Unconfined, or unset on a kubelet that defaults to it
	case s.runtimeDefaultKeys != nil:
		b.addRef("RuntimeDefault ("+s.runtimeDefaultKeys[1].Name+")", s.runtimeDefaultKeys)
	case s.runtimeDefault != nil:
		b.set = b.set.or(*s.runtimeDefault)
	default:
		b.ps.usesFull = true
	}
}

// addLegacyAnnotations adds every Localhost legacy annotation, sorted, even for containers
// that no longer exist or are overridden by a field, so the result never depends on map
// iteration order.
func (b *podSetBuilder) addLegacyAnnotations() {
	var annKeys []string
	for k := range b.pod.Annotations {
		if k == annotationPodSeccomp || strings.HasPrefix(k, annotationContainerSeccomp) {
			annKeys = append(annKeys, k)
		}
	}
	sort.Strings(annKeys)
	for _, k := range annKeys {
		if v := b.pod.Annotations[k]; strings.HasPrefix(v, localhostPrefix) {
			b.addPath(v)
		}
	}
}

// ownedByDaemonSet reports whether a DaemonSet controls pod.
func ownedByDaemonSet(pod *v1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// notes are what a decision record says about the set besides its size.
func (ps podSet) notes() []string {
	out := append([]string(nil), ps.skipped...)
	for _, m := range ps.missing {
		out = append(out, "seccomp profile "+m+" not found; counted as the full profile")
	}
	return out
}
