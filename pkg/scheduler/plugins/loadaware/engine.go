package loadaware

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/workloadprofile"
)

// AnnotationUsageThresholdPrefix + "<resource>-usage-threshold" on a node overrides
// usageThresholds[resource] for that node, e.g. berth.io/cpu-usage-threshold: "70".
const AnnotationUsageThresholdPrefix = "berth.io/"

// UsageThresholdAnnotation returns the node annotation key for resource r.
func UsageThresholdAnnotation(r v1.ResourceName) string {
	return AnnotationUsageThresholdPrefix + string(r) + "-usage-threshold"
}

// Engine is one plugin instance's view of real load: its own watcher loop, its own placed-pod
// tracker, its own args. Nothing is shared between instances, so two profiles with different
// settings cannot interfere.
type Engine struct {
	plugin  string
	args    CommonArgs
	expiry  time.Duration
	Watcher *Watcher
	Tracker *Tracker
	now     func() time.Time
	memo    scoreMemo
	// nodes finds a node's capacity for Unreported (the debug answer), which scoring gets
	// from the node object it scores; nil without an informer factory.
	nodes corelisters.NodeLister
	// timeRuleSaid is set once the log said the watcher sends no per-pod usage.
	timeRuleSaid atomic.Bool
	// Profiles are the workload profiles learned from the watcher's per-pod usage: a pod of a
	// workload with a usable one is estimated from it instead of its spec (profiles.go).
	Profiles *Profiles
}

// sayRule logs, once per engine, that the watcher serves node metrics without per-pod usage:
// placed pods' estimates then fade by the share of the window since the pod's sample began.
func (e *Engine) sayRule(ctx context.Context, s *Snapshot) {
	if s == nil || s.PerPod || !s.listsPods() || e.timeRuleSaid.Swap(true) {
		return // a document before any pod runs says nothing about per-pod usage yet
	}
	klog.FromContext(ctx).Info("Load watcher serves no per-pod usage: a placed pod counts estimate × (1 − covered/window) until the window holds it",
		"plugin", e.plugin, "source", s.Source, "window", s.Window)
}

// Options are the plugin's choices and test seams; zero values mean production behaviour.
type Options struct {
	// Now replaces time.Now.
	Now func() time.Time
	// NoLoop skips starting the refresh goroutine (tests drive Watcher.Refresh themselves).
	NoLoop bool
	// UpstreamCPU is the plugin's reading of CPU from an upstream watcher's document (nil:
	// GetResourceData's); Berth's typed form needs none. It decides CPU for this engine's
	// Filter too, so a plugin reads one CPU number per node.
	UpstreamCPU UpstreamCPU
	// Profiles replaces the args' workload profile settings (tests; validated by NewEngine).
	Profiles *workloadprofile.Args
}

// NewEngine builds the engine, registers the tracker on the framework's pod informer (when
// handle has one) and starts the refresh loop, which stops when ctx ends. args must be
// defaulted and valid.
func NewEngine(ctx context.Context, plugin string, args CommonArgs, handle fwk.Handle, est Estimator, opts Options) (*Engine, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	e := &Engine{
		plugin:  plugin,
		args:    args,
		expiry:  time.Duration(*args.MetricsExpirySeconds) * time.Second,
		Tracker: NewTracker(time.Duration(*args.AssumedPodExpirySeconds)*time.Second, est, now),
		now:     now,
	}
	pargs, profilesOn := workloadprofile.FromConfig(args.WorkloadProfiles)
	if opts.Profiles != nil {
		pargs = *opts.Profiles
	}
	if err := pargs.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", plugin, err)
	}
	if profilesOn {
		// why nil when off: Profiles' readers treat nil as "no profile", so every pod keeps
		// its spec rule and nothing is learned or held.
		e.Profiles = NewProfiles(pargs)
	}
	// Every placed pod's estimate (Reserve, pods bound by others, the usage Filter,
	// /debug/berth/placed) goes through the profile first.
	e.Tracker.estimate = func(pod *v1.Pod) Estimate { return e.Estimate(pod, est) }
	e.Tracker.sourced = func(pod *v1.Pod) Sourced { return e.estimateSourced(pod, est) }
	e.Tracker.estimateFor = EstimateWindow(args)
	// why a closure: the counter is registered with the watcher below, and a child taken
	// before that would count nowhere.
	e.Tracker.ignored = func() { annotationsIgnored.WithLabelValues(plugin).Inc() }
	e.Watcher = NewWatcher(plugin, args.WatcherAddress,
		time.Duration(*args.RefreshIntervalSeconds)*time.Second,
		time.Duration(*args.WatcherTimeoutSeconds)*time.Second, now)
	e.Watcher.install = e.Tracker.Install
	e.Watcher.upstreamCPU = opts.UpstreamCPU
	e.Watcher.onSnapshot = func(s *Snapshot) {
		e.Tracker.Prune(s, e.expiry)
		e.sayRule(ctx, s)
		e.Profiles.Learn(s, e.capacityOf, now())
	}
	if handle != nil {
		if f := handle.SharedInformerFactory(); f != nil {
			if _, err := f.Core().V1().Pods().Informer().AddEventHandler(e.Tracker.EventHandler()); err != nil {
				return nil, fmt.Errorf("%s: registering pod event handler: %w", plugin, err)
			}
			if e.Profiles != nil {
				if _, err := f.Core().V1().Pods().Informer().AddEventHandler(e.Profiles.EventHandler()); err != nil {
					return nil, fmt.Errorf("%s: registering profile pod event handler: %w", plugin, err)
				}
			}
			// The scheduler's own node informer: no new watch.
			e.nodes = f.Core().V1().Nodes().Lister()
		}
	}
	if !opts.NoLoop {
		go e.Watcher.Run(ctx)
	}
	return e, nil
}

// Estimate is what pod is expected to use: its workload's profile estimate when the workload
// has a usable profile, else the plugin's spec rule est. The profile replaces the spec rule
// whatever the pod's annotations say: none of them can lower it.
func (e *Engine) Estimate(pod *v1.Pod, est Estimator) Estimate {
	return e.estimateSourced(pod, est).Estimate
}

// LearnedMilliCPU is pod's CPU estimate when it is learned (its workload's usable profile, else
// its namespace's usable ratio); false: the caller's spec rule applies.
func (e *Engine) LearnedMilliCPU(pod *v1.Pod) (int64, bool) {
	s, ok := e.learned(pod)
	return s.MilliCPU, ok
}

// learned is pod's learned estimate, in the one order every reader follows: its workload's
// usable profile, else its namespace's usable ratio (CPU only: the ratio is CPU's, so memory
// is left to the caller's spec rule); false: neither.
func (e *Engine) learned(pod *v1.Pod) (Sourced, bool) {
	if p, mean, ok := e.Profiles.EstimateMean(pod); ok {
		return learnedSourced(fromProfile, p, mean), true
	}
	if m, mean, ok := e.Profiles.NamespaceEstimate(pod); ok {
		return learnedSourced(fromNamespace, Estimate{MilliCPU: m}, mean), true
	}
	return Sourced{}, false
}

// estimateSourced is Estimate and where it came from: the learned estimate (a namespace's with
// the spec rule's memory), else the spec rule.
func (e *Engine) estimateSourced(pod *v1.Pod, est Estimator) Sourced {
	s, ok := e.learned(pod)
	if !ok {
		return Sourced{Estimate: est(pod)}
	}
	if s.source == fromNamespace {
		s.MemoryBytes = est(pod).MemoryBytes
	}
	return s
}

// capacityOf is a node's capacity from the scheduler's node informer (zero without one).
func (e *Engine) capacityOf(name string) Capacity {
	if e.nodes == nil {
		return Capacity{}
	}
	node, err := e.nodes.Get(name)
	if err != nil {
		return Capacity{}
	}
	return CapacityOf(node)
}

// NodeState is what Score and Filter read for one node.
type NodeState struct {
	NodeView
	// Unreported is what of the estimates of pods placed on the node its scored window does not
	// hold yet (their remaining estimate).
	Unreported Estimate
	// HeldAtEstimate is the part of Unreported that pods in their estimate window
	// (estimateSeconds) make: measured, but counted at no less than their estimate.
	HeldAtEstimate Estimate
	entry          *nodeEntry
}

// CapacityMilliCPU is node.Status.Capacity's CPU in millicores, parsed once per node object
// (per snapshot) instead of once per pod: Score reads it for every node of every cycle, and
// reaching into the object's quantity map costs more than the rest of the score.
func (st NodeState) CapacityMilliCPU(node *v1.Node) int64 {
	if st.entry != nil {
		if d := st.entry.derived.Load(); d != nil && d.node == node {
			return d.capacityMilliCPU
		}
	}
	// Indexed, not Capacity.Cpu(): that returns a pointer to a copy, an allocation. A missing
	// entry is the zero quantity either way.
	q := node.Status.Capacity[v1.ResourceCPU]
	milli := q.MilliValue()
	if st.entry != nil {
		st.entry.derived.Store(&nodeDerived{node: node, capacityMilliCPU: milli})
	}
	return milli
}

// Node returns the node's metrics and its placed pods' remaining estimate by name alone: without
// the node's capacity, per-pod shares cannot be converted and the time rule applies (NodeOf
// is what scoring uses).
func (e *Engine) Node(name string) NodeState { return e.nodeState(name, Capacity{}) }

// NodeOf returns the node's metrics (memory only, no I/O) and what of its placed pods'
// estimates the scored window does not hold yet. It runs for every scored node of every cycle:
// one clock read, one map lookup, no lock and no allocation when the snapshot came through
// this engine's tracker (Tracker.Install).
func (e *Engine) NodeOf(node *v1.Node) NodeState { return e.nodeState(node.Name, CapacityOf(node)) }

func (e *Engine) nodeState(name string, c Capacity) NodeState {
	now := e.now()
	v, en := e.Watcher.Snapshot().node(name, now, e.expiry)
	st := NodeState{NodeView: v, entry: en}
	if en != nil && en.bucket != nil {
		st.Unreported, st.HeldAtEstimate = e.Tracker.sum(en.bucket, v, c, now)
	} else {
		st.Unreported, st.HeldAtEstimate = e.Tracker.unreportedAt(name, v, c, now)
	}
	return st
}

// NeutralScore is the score for a node whose load is unknown.
func (e *Engine) NeutralScore() int64 { return *e.args.NeutralScore }

// Reserve counts pod on node from now on.
func (e *Engine) Reserve(pod *v1.Pod, node string) { e.Tracker.Add(pod, node, e.now()) }

// Unreserve stops counting pod.
func (e *Engine) Unreserve(pod *v1.Pod) { e.Tracker.Remove(pod.UID) }

// FilterNeeded says whether Filter can refuse any node: only with usage thresholds or the Block
// policy. Without (the default) the plugins' PreFilter returns Skip, so the framework does not
// call Filter for every node of the cycle just to pass it.
func (e *Engine) FilterNeeded() bool {
	return len(e.args.UsageThresholds) > 0 || e.args.ExpiredMetricsAction == ExpiredMetricsBlock
}

// PreFilter is the plugins' PreFilter: Skip when Filter has nothing to check.
func (e *Engine) PreFilter() *fwk.Status {
	if !e.FilterNeeded() {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Filter applies the expired-metrics policy and the usage thresholds. It never fails because
// the signal is missing: without usable data a node passes, except under Block while the
// watcher is demonstrably alive for other nodes.
func (e *Engine) Filter(ctx context.Context, pod *v1.Pod, node *v1.Node) *fwk.Status {
	if node == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	if !e.FilterNeeded() {
		// The default: nothing to filter on, so no per-node lookups on the hot path.
		return nil
	}
	st := e.NodeOf(node)
	if st.Freshness != Fresh {
		if e.args.ExpiredMetricsAction == ExpiredMetricsBlock && e.Watcher.Snapshot().SignalAlive(e.now(), e.expiry) {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node(s) had %s load metrics", st.Freshness))
		}
		return nil
	}
	if len(e.args.UsageThresholds) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	var incoming Estimate
	estimated := pod == nil // no pod (tests of the node side only): nothing incoming
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		limit, ok := e.args.UsageThresholds[r]
		if ok {
			if s, has := node.Annotations[UsageThresholdAnnotation(r)]; has {
				v, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(s, "%")), 10, 64)
				if err != nil || v < 1 || v > 100 {
					// A bad annotation is an operator typo, not a reason to stop scheduling.
					logger.V(2).Info("Ignoring invalid usage threshold annotation", "node", node.Name, "annotation", UsageThresholdAnnotation(r), "value", s)
				} else {
					limit = v
				}
			}
		}
		if !ok {
			continue
		}
		if !estimated {
			// Once per node and cycle at most, and only when a threshold applies.
			incoming, estimated = e.Tracker.estimate(pod), true
		}
		window, placed, self, known := usageTerms(node, st, incoming, r)
		if used := window + placed + self; known && used > float64(limit) {
			// Numbers go to the log only: the framework groups identical reasons across nodes.
			logger.V(4).Info("Node over usage threshold", "node", node.Name, "resource", r, "usagePercent", used,
				"windowPercent", window, "placedPercent", placed, "podPercent", self, "threshold", limit)
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node(s) %s usage exceeds threshold", r))
		}
	}
	return nil
}

// usageTerms are the node's usage after placing the pod, as percentages of capacity (the
// watcher's are of capacity), term by term: the window average, the placed pods' remaining
// estimate, and the incoming pod's estimate.
func usageTerms(node *v1.Node, st NodeState, pod Estimate, r v1.ResourceName) (window, placed, self float64, known bool) {
	var rd ResourceData
	var extra, own, capacity float64
	c := CapacityOf(node)
	switch r {
	case v1.ResourceCPU:
		rd = st.Metrics.CPU
		extra, own = float64(st.Unreported.MilliCPU), float64(pod.MilliCPU)
		capacity = float64(c.MilliCPU)
	case v1.ResourceMemory:
		rd = st.Metrics.Memory
		extra, own = float64(st.Unreported.MemoryBytes), float64(pod.MemoryBytes)
		capacity = float64(c.MemoryBytes)
	}
	if !rd.Valid || capacity <= 0 {
		return 0, 0, 0, false
	}
	return rd.Avg, 100 * extra / capacity, 100 * own / capacity, true
}

// RoundScore rounds half away from zero after snapping float noise: exact-half scores such as
// 57.5 (= 100·(1 − 0.85/2)) come out of float arithmetic as 57.4999999…; without the snap
// they would round down, unlike the arithmetic the formulas describe. The result is a node
// score, so it is kept within [0, 100] whatever went in (NaN gives 0).
func RoundScore(x float64) int64 {
	if math.IsNaN(x) {
		return 0
	}
	return int64(math.Round(math.Round(min(max(x, 0), 100)*1e9) / 1e9))
}

// unreportedOf is Score's reading of the node: with its capacity (from the scheduler's node
// informer), measured per-pod use counts; by name alone only the time rule could apply, which
// overstates every pod the agent has measured.
func (e *Engine) unreportedOf(name string) NodeUnreported {
	c := Capacity{}
	if e.nodes != nil {
		if node, err := e.nodes.Get(name); err == nil {
			c = CapacityOf(node)
		}
	}
	now := e.now()
	v, _ := e.Watcher.Snapshot().node(name, now, e.expiry)
	return e.Tracker.unreportedCounted(name, v, c, now)
}

// NodeUnreported is what Score adds to a node for placed pods its report does not include yet,
// and how many pods that is, of which how many count at their workload's profile.
type NodeUnreported struct {
	Estimate
	Pods, FromProfile, FromNamespace int
}

// Unreported is NodeUnreported for the nodes where it is not nothing (read for `kubectl berth
// nodes`, not in a cycle).
func (e *Engine) Unreported() map[string]NodeUnreported {
	out := map[string]NodeUnreported{}
	for _, n := range e.Tracker.Nodes() {
		if u := e.unreportedOf(n); u.Estimate != (Estimate{}) {
			out[n] = u
		}
	}
	return out
}
