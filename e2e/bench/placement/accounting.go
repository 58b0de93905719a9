package placement

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// Accounting is the load simulator's ledger: which scenario pods run on which node, and what
// that makes each node's load. It is what the fixture /proc trees are rewritten from, so a
// mistake here would make the benchmark measure nothing; TestAccounting pins it.
type Accounting struct {
	mu      sync.Mutex
	nodes   map[string]NodeSpec
	pods    map[string]*PodSpec
	running map[string]string // pod → node
	// dev is each bursty pod's current deviation from its mean CPU use, in millicores.
	dev map[string]float64
	// uids are the pods' API UIDs (the agents find pod cgroups by UID).
	uids map[string]string
	// stints are when each pod was seen bound to a node and deleted, for Drift.
	stints []stint
	open   map[string]int // pod → its open stint
}

// stint is one pod's time on one node: from the moment it was seen bound to its deletion (zero:
// still there).
type stint struct {
	pod, node string
	from, to  time.Time
}

// Adopt makes pod known with spec: workload pods, whose names only the controllers choose.
func (a *Accounting) Adopt(pod string, spec *PodSpec) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pods[pod] = spec
}

// Bound records pod seen bound to node at t (once per pod and node).
func (a *Accounting) Bound(pod, node string, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open == nil {
		a.open = map[string]int{}
	}
	if i, ok := a.open[pod]; ok {
		if a.stints[i].node == node {
			return
		}
		a.stints[i].to = t
	}
	a.open[pod] = len(a.stints)
	a.stints = append(a.stints, stint{pod: pod, node: node, from: t})
}

// Gone records pod deleted at t.
func (a *Accounting) Gone(pod string, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, ok := a.open[pod]; ok {
		a.stints[i].to = t
		delete(a.open, pod)
	}
}

// Drift is how much node's true mean CPU (percent) changed between t0 and t1 by pods other than
// pod: those bound there after t0 and still there at t1, less those there at t0 and deleted by
// t1. A prediction made for pod at t0 did not include these, so the load measured at t1 minus
// Drift is what the prediction is compared with.
func (a *Accounting) Drift(node, pod string, t0, t1 time.Time) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.nodes[node]
	if !ok || n.MilliCPU <= 0 {
		return 0
	}
	var milli float64
	for _, s := range a.stints {
		spec := a.pods[s.pod]
		if s.node != node || s.pod == pod || spec == nil {
			continue
		}
		gone := !s.to.IsZero() && !s.to.After(t1)
		switch {
		case s.from.After(t0) && !s.from.After(t1) && !gone:
			milli += spec.UseMilliCPU
		case !s.from.After(t0) && gone && s.to.After(t0):
			milli -= spec.UseMilliCPU
		}
	}
	return 100 * milli / float64(n.MilliCPU)
}

// SetUID records pod's UID, under which PodShares names it.
func (a *Accounting) SetUID(pod, uid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.uids == nil {
		a.uids = map[string]string{}
	}
	a.uids[pod] = uid
}

// PodShare is one running pod's use as its node's fixture cgroup holds it: CPU in percent of
// the node, memory as that share of the fixture's MemTotal.
type PodShare struct {
	UID         string
	CPU, Memory float64
}

// PodShares are the shares of the pods running on node with a known UID, sorted by UID. They
// add up to the node's load above its base: on a saturated node (demand over 100 %) every pod
// gets the same fraction of what it asks, as the kernel's fair share would give.
func (a *Accounting) PodShares(node string) []PodShare {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.nodes[node]
	if !ok {
		return nil
	}
	var out []PodShare
	var demand float64
	for p, on := range a.running {
		uid := a.uids[p]
		if on != node || uid == "" {
			continue
		}
		spec := a.pods[p]
		cpu := 100 * max(0, spec.UseMilliCPU+a.dev[p]) / float64(n.MilliCPU)
		demand += cpu
		out = append(out, PodShare{UID: uid, CPU: cpu, Memory: 100 * spec.UseMemMiB / float64(n.MemoryMiB)})
	}
	if room := 100 - n.BaseCPU; demand > room && demand > 0 {
		for i := range out {
			out[i].CPU *= max(room, 0) / demand
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// NewAccounting starts with no pod running.
func NewAccounting(s *Scenario) *Accounting {
	a := &Accounting{nodes: map[string]NodeSpec{}, pods: map[string]*PodSpec{}, running: map[string]string{}, dev: map[string]float64{}}
	for _, n := range s.Nodes {
		a.nodes[n.Name] = n
	}
	for i := range s.Pods {
		a.pods[s.Pods[i].Name] = &s.Pods[i]
	}
	return a
}

// Place records pod running on node (moving it if it ran elsewhere). Pods or nodes the
// scenario does not know (agent pods, other namespaces) are ignored: they use nothing here.
func (a *Accounting) Place(pod, node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pods[pod]; !ok {
		return
	}
	if _, ok := a.nodes[node]; !ok {
		return
	}
	a.running[pod] = node
}

// Remove records that pod stopped (deleted, finished, or never ran).
func (a *Accounting) Remove(pod string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.running, pod)
	delete(a.dev, pod)
}

// Redraw gives every running bursty pod a new deviation from its mean use, normally
// distributed with its BurstMilliCPU as standard deviation; the agent's windowed standard
// deviation then reflects it, which is what LoadVariationRiskBalancing reads.
func (a *Accounting) Redraw(rng *rand.Rand) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Sorted so one seed gives one sequence of draws for the same placements.
	names := make([]string, 0, len(a.running))
	for p := range a.running {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if s := a.pods[p].BurstMilliCPU; s > 0 {
			a.dev[p] = s * rng.NormFloat64()
		}
	}
}

// Load is a node's utilisation in percent: its base load plus the use of the pods running on
// it. CPU is what the node can deliver (at most 100 %); demand is the CPU asked for, which
// exceeds 100 % on an overcommitted node. Unknown nodes have no load.
func (a *Accounting) Load(node string) (cpu, mem, demand float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.nodes[node]
	if !ok {
		return 0, 0, 0
	}
	var useCPU, useMem float64
	for p, on := range a.running {
		if on != node {
			continue
		}
		spec := a.pods[p]
		useCPU += max(0, spec.UseMilliCPU+a.dev[p])
		useMem += spec.UseMemMiB
	}
	demand = n.BaseCPU + 100*useCPU/float64(n.MilliCPU)
	mem = min(100, n.BaseMemory+100*useMem/float64(n.MemoryMiB))
	return min(100, demand), mem, demand
}

// Running lists the pods running on node, sorted.
func (a *Accounting) Running(node string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for p, on := range a.running {
		if on == node {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// NodesUsed is how many nodes run at least one scenario pod.
func (a *Accounting) NodesUsed() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	used := map[string]bool{}
	for _, on := range a.running {
		used[on] = true
	}
	return len(used)
}

// Expected is a node's utilisation with every pod at its mean use (no burst draw): what the
// watcher's served value should average to, for the end-of-run cross-check.
func (a *Accounting) Expected(node string) (cpu, mem float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.nodes[node]
	if !ok {
		return 0, 0
	}
	var useCPU, useMem float64
	for p, on := range a.running {
		if on == node {
			useCPU += a.pods[p].UseMilliCPU
			useMem += a.pods[p].UseMemMiB
		}
	}
	return min(100, n.BaseCPU+100*useCPU/float64(n.MilliCPU)), min(100, n.BaseMemory+100*useMem/float64(n.MemoryMiB))
}

// Breakdown is what makes up a node's load in the simulator's ledger at one moment, in percent
// of its CPU: it tells a node that the fit filter left as the only place for requests (Requested
// near 100) from one whose pods use more than they ask (Under) or were in a burst (Burst).
type Breakdown struct {
	Pods int
	// Base, Requested and Mean: the node's own load, its pods' CPU requests, and base + the
	// pods' mean use.
	Base, Requested, Mean float64
	// Under is the mean use of the pods that use more than they request; Burst is the sum of
	// the bursty pods' current deviations from their means.
	Under, Burst float64
}

// Breakdown reads node's ledger now; a node the scenario does not know has none.
func (a *Accounting) Breakdown(node string) Breakdown {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.nodes[node]
	if !ok || n.MilliCPU <= 0 {
		return Breakdown{}
	}
	pct := func(milli float64) float64 { return 100 * milli / float64(n.MilliCPU) }
	b := Breakdown{Base: n.BaseCPU, Mean: n.BaseCPU}
	for p, on := range a.running {
		if on != node {
			continue
		}
		spec := a.pods[p]
		b.Pods++
		b.Requested += pct(float64(spec.ReqMilliCPU))
		b.Mean += pct(spec.UseMilliCPU)
		if spec.Class == "under" {
			b.Under += pct(spec.UseMilliCPU)
		}
		b.Burst += pct(a.dev[p])
	}
	return b
}

func (b Breakdown) String() string {
	return fmt.Sprintf("ledger then: %d pods, %.0f %% requested, base %.0f + mean use %.0f = %.0f %% (under-requesting pods %.0f), bursts %+.0f",
		b.Pods, b.Requested, b.Base, b.Mean-b.Base, b.Mean, b.Under, b.Burst)
}
