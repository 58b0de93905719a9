package placement

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Shapes of a scenario: "bare" is the first table's independent bare pods; "workloads" builds
// most pods from Deployments and StatefulSets whose replicas share a use of their own; "growth"
// is the same workloads already running when they scale up (grow).
const (
	ShapeBare      = "bare"
	ShapeWorkloads = "workloads"
	ShapeGrowth    = "growth"
)

// Shapes are every scenario shape.
var Shapes = []string{ShapeWorkloads, ShapeGrowth, ShapeBare}

// Kinds of simulated controllers.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
)

// Labels the workload pods carry, read back by the simulator to know whose replica a pod is.
const (
	labelWorkload = "placement-workload"
	labelRevision = "placement-revision"
)

// WorkloadSpec is one simulated controller (a real Deployment or StatefulSet in the run): what
// its pods ask for and how they use it. Its replicas are alike: each one's mean use is drawn
// around the workload's (Spread), the way replicas of one service behind one load balancer are.
type WorkloadSpec struct {
	Name, Kind                          string
	ReqMilliCPU, ReqMemMiB, LimMilliCPU int64
	// Class as PodSpec's; UseFrac is the replicas' mean CPU use as a fraction of the request,
	// Spread the relative standard deviation between replicas; MemFrac the memory use.
	Class                     string
	UseFrac, Spread, MemFrac  float64
	BurstFrac                 float64 // each replica's CPU standard deviation, × its mean use
	Arrive, Initial, Replicas int     // created at wave Arrive with Initial replicas
	// ScaleAt is the wave that scales it to Replicas (-1: starts at Replicas); RolloutAt the wave
	// of a rolling update to a new template whose pods use RolloutFactor × the old use (-1:
	// none); Leave the wave it is deleted at (-1: stays).
	ScaleAt, RolloutAt, Leave int
	RolloutFactor             float64
}

// replicasAt is how many replicas the workload asks for after wave w's changes (0: absent).
func (w *WorkloadSpec) replicasAt(wave int) int {
	switch {
	case wave < w.Arrive || (w.Leave >= 0 && wave >= w.Leave):
		return 0
	case w.ScaleAt >= 0 && wave >= w.ScaleAt:
		return w.Replicas
	}
	return w.Initial
}

// revisionAt is the template revision after wave w (0 before the rollout, 1 after).
func (w *WorkloadSpec) revisionAt(wave int) int {
	if w.RolloutAt >= 0 && wave >= w.RolloutAt {
		return 1
	}
	return 0
}

// replica is the i-th replica of revision rev: its mean use is a deterministic draw of (seed,
// workload, revision, i), so every run of a seed gives the n-th pod the same use whichever
// scheduler placed the ones before it.
func (w *WorkloadSpec) replica(seed uint64, rev, i int, name string) *PodSpec {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d", w.Name, rev, i)
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	frac := w.UseFrac * max(0.05, 1+w.Spread*rng.NormFloat64())
	if rev > 0 {
		frac *= w.RolloutFactor
	}
	use := frac * float64(w.ReqMilliCPU)
	return &PodSpec{Name: name, ReqMilliCPU: w.ReqMilliCPU, ReqMemMiB: w.ReqMemMiB, LimMilliCPU: w.LimMilliCPU,
		UseMilliCPU: use, UseMemMiB: w.MemFrac * float64(w.ReqMemMiB), BurstMilliCPU: w.BurstFrac * use,
		Class: w.Class, Arrive: -1, Leave: -1}
}

// replicaSizes are the workloads' final replica counts with weights: many small services, a few
// wide ones, up to 30.
var replicaSizes = []struct{ n, weight int }{{1, 3}, {2, 3}, {3, 3}, {5, 2}, {8, 2}, {12, 1}, {20, 1}, {30, 1}}

// WorkloadBareShare is the share of a workload scenario's pods that are bare pods.
const WorkloadBareShare = 0.2

// generateWorkloads fills s with workloads until their replicas at the end reach the pods the
// bare scenario would keep ((1 − bare share) × o.Pods × (1 − leave share)), plus a bare share of
// bare pods drawn as in the bare scenario. Workloads arrive over the waves (half of them at
// wave 0); of those arriving before the last wave, 30 % start smaller and scale up later, 25 %
// get one rolling update, 10 % are deleted later.
func generateWorkloads(o ScenarioOptions, s *Scenario, rng *rand.Rand) {
	want := int(float64(o.Pods) * (1 - WorkloadBareShare) * (1 - o.LeaveShare))
	sizeWeight := 0
	for _, z := range replicaSizes {
		sizeWeight += z.weight
	}
	for end := 0; end < want; {
		pick := rng.IntN(sizeWeight)
		n := replicaSizes[len(replicaSizes)-1].n
		for _, z := range replicaSizes {
			if pick < z.weight {
				n = z.n
				break
			}
			pick -= z.weight
		}
		n = min(n, max(want-end, 1))
		w := drawWorkload(o, rng, len(s.Workloads), n)
		if o.Shape == ShapeGrowth {
			grow(o, rng, &w)
		}
		if w.Leave < 0 {
			end += n
		}
		s.Workloads = append(s.Workloads, w)
	}
	bare := int(float64(o.Pods) * WorkloadBareShare)
	for i := range bare {
		p := drawPod(o, rng, i)
		p.Arrive = i * o.Waves / max(bare, 1)
		p.Leave = -1
		if p.Arrive < o.Waves-1 && rng.Float64() < o.LeaveShare {
			p.Leave = p.Arrive + 1 + rng.IntN(o.Waves-1-p.Arrive)
		}
		s.Pods = append(s.Pods, p)
	}
}

// drawWorkload draws workload i of n replicas: its pod shape as a bare pod's, its replicas'
// spread and its timeline.
func drawWorkload(o ScenarioOptions, rng *rand.Rand, i, n int) WorkloadSpec {
	p := drawPod(o, rng, i)
	w := WorkloadSpec{Name: fmt.Sprintf("pl-wl-%03d", i), Kind: KindDeployment, ReqMilliCPU: p.ReqMilliCPU,
		ReqMemMiB: p.ReqMemMiB, LimMilliCPU: p.LimMilliCPU, Class: p.Class,
		UseFrac: p.UseMilliCPU / float64(p.ReqMilliCPU), MemFrac: p.UseMemMiB / float64(p.ReqMemMiB),
		Spread: 0.05 + 0.1*rng.Float64(), Initial: n, Replicas: n, ScaleAt: -1, RolloutAt: -1, Leave: -1, RolloutFactor: 1}
	if p.BurstMilliCPU > 0 {
		w.BurstFrac = p.BurstMilliCPU / p.UseMilliCPU
	}
	if rng.Float64() < 0.3 {
		w.Kind = KindStatefulSet
	}
	if rng.Float64() >= 0.5 {
		w.Arrive = rng.IntN(o.Waves)
	}
	if later := o.Waves - 1 - w.Arrive; later > 0 {
		if n > 1 && rng.Float64() < 0.3 {
			w.Initial, w.ScaleAt = max(1, n/3), w.Arrive+1+rng.IntN(later)
		}
		if rng.Float64() < 0.25 {
			// A new version: its pods use 0.7–1.4× what the old ones did.
			w.RolloutAt, w.RolloutFactor = w.Arrive+1+rng.IntN(later), 0.7+0.7*rng.Float64()
		}
		if rng.Float64() < 0.1 {
			w.Leave = w.Arrive + 1 + rng.IntN(later)
		}
	}
	return w
}

// grow makes w a workload that is already running when it scales: it arrives in the first
// two waves with a third of its replicas (at least one) and scales to all of them at a wave
// from the fourth on, once its first replicas have run for several measurement windows. That
// is what workload profiles are for: a new replica of a service whose siblings are measured.
// No rollout (a new template starts a new profile) and no deletion.
func grow(o ScenarioOptions, rng *rand.Rand, w *WorkloadSpec) {
	w.Arrive, w.Initial, w.ScaleAt, w.RolloutAt, w.Leave, w.RolloutFactor = rng.IntN(min(2, o.Waves)), w.Replicas, -1, -1, -1, 1
	if w.Replicas > 1 && o.Waves > 3 {
		w.Initial, w.ScaleAt = max(1, w.Replicas/3), 3+rng.IntN(o.Waves-3)
	}
}

// book knows every pod's true use: the scenario's bare pods by name, and each workload pod from
// its labels, drawn once when first seen (its replica index is its ordinal for a StatefulSet,
// else the order the pods of its revision were first seen in).
type book struct {
	seed      uint64
	mu        sync.Mutex
	bare      map[string]*PodSpec
	workloads map[string]*WorkloadSpec
	pods      map[string]*PodSpec
	seen      map[string]int // workload/revision → pods seen
	owner     map[string]bool
}

func newBook(sc *Scenario) *book {
	b := &book{seed: sc.Seed, bare: map[string]*PodSpec{}, workloads: map[string]*WorkloadSpec{},
		pods: map[string]*PodSpec{}, seen: map[string]int{}, owner: map[string]bool{}}
	for i := range sc.Pods {
		b.bare[sc.Pods[i].Name] = &sc.Pods[i]
	}
	for i := range sc.Workloads {
		b.workloads[sc.Workloads[i].Name] = &sc.Workloads[i]
	}
	return b
}

// spec is pod's true use, nil for a pod the scenario does not know (an agent's pod).
func (b *book) spec(pod *corev1.Pod) *PodSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.pods[pod.Name]; ok {
		return p
	}
	if p, ok := b.bare[pod.Name]; ok {
		b.pods[pod.Name] = p
		return p
	}
	w := b.workloads[pod.Labels[labelWorkload]]
	if w == nil {
		return nil
	}
	rev, _ := strconv.Atoi(pod.Labels[labelRevision])
	key := w.Name + "/" + strconv.Itoa(rev)
	i := b.seen[key]
	if w.Kind == KindStatefulSet {
		// A StatefulSet's pod is its ordinal; a rollout's replacement has the new revision's label.
		if o, err := strconv.Atoi(pod.Name[len(w.Name)+1:]); err == nil {
			i = o
		}
	}
	b.seen[key]++
	p := w.replica(b.seed, rev, i, pod.Name)
	b.pods[pod.Name] = p
	b.owner[pod.Name] = true
	return p
}

// ofWorkload says pod was built from a workload (false for bare pods and unknown ones).
func (b *book) ofWorkload(pod string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owner[pod]
}

// forget drops a deleted pod so a StatefulSet replacement of the same name is drawn afresh.
func (b *book) forget(pod string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.owner[pod] {
		delete(b.pods, pod)
	}
}

// workloadTotals are the mean requests and use of the workloads' replicas at the end.
func (s *Scenario) workloadTotals() (req int64, use float64) {
	last := s.Waves - 1
	for i := range s.Workloads {
		w := &s.Workloads[i]
		n := w.replicasAt(last)
		f := w.UseFrac
		if w.revisionAt(last) > 0 {
			f *= w.RolloutFactor
		}
		req += int64(n) * w.ReqMilliCPU
		use += float64(n) * f * float64(w.ReqMilliCPU)
	}
	return req, use
}

// replicasAtEnd sums the workloads' replicas at the end.
func (s *Scenario) replicasAtEnd() int {
	n := 0
	for i := range s.Workloads {
		n += s.Workloads[i].replicasAt(s.Waves - 1)
	}
	return n
}
