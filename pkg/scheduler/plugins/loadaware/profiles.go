package loadaware

import (
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/berth-sched/berth/pkg/workloadprofile"
)

// Profiles learns workload profiles from the per-pod usage of every document the engine takes
// (its refresh loop, never a scheduling cycle) and publishes them as one immutable map that
// estimates read with a single lookup. It knows pods from the scheduler's pod informer:
// their workload key, the node they are bound to, and when.
type Profiles struct {
	args workloadprofile.Args
	mu   sync.Mutex
	// pods are the bound pods with a workload key; a sample is learned only for a pod the
	// reporting node holds, so an agent naming another node's pod teaches nothing.
	pods      map[types.UID]podRef
	learner   *workloadprofile.Learner
	published atomic.Pointer[map[workloadprofile.Key]workloadprofile.Profile]
	// namespaces learns each namespace's use-to-request ratio from all its measured pods with
	// a CPU request (nil: namespaceMinPods 0, off).
	namespaces *workloadprofile.NamespaceLearner
	ratios     atomic.Pointer[map[string]workloadprofile.Ratio]
}

type podRef struct {
	key    workloadprofile.Key
	hasKey bool
	ns     string
	// reqMilliCPU is the pod's CPU request (0: none, its use says nothing of a ratio).
	reqMilliCPU int64
	node        string
	bound       time.Time
}

// NewProfiles builds an empty learner; args must be valid. Nothing is published (every pod
// gets its spec rule) until the first document with per-pod usage is learned.
func NewProfiles(args workloadprofile.Args) *Profiles {
	p := &Profiles{args: args, pods: map[types.UID]podRef{}, learner: workloadprofile.NewLearner(args)}
	if args.NamespaceMinPods > 0 {
		p.namespaces = workloadprofile.NewNamespaceLearner(args)
	}
	return p
}

// Lookup is pod's workload profile, usable or not; found is false for a pod without a workload
// key or whose workload has no measured pod. One map lookup, no allocation: Filter calls it per
// node.
func (p *Profiles) Lookup(pod *v1.Pod) (prof workloadprofile.Profile, key workloadprofile.Key, hasKey, found bool) {
	key, hasKey = workloadprofile.KeyOf(pod)
	if !hasKey || p == nil {
		return prof, key, hasKey, false
	}
	if m := p.published.Load(); m != nil {
		prof, found = (*m)[key]
	}
	return prof, key, hasKey, found
}

// EstimateMean is pod's profile estimate when its workload has a usable profile, with the
// siblings' mean CPU (millicores) it adds its margin to.
func (p *Profiles) EstimateMean(pod *v1.Pod) (est Estimate, meanMilliCPU float64, ok bool) {
	prof, _, _, found := p.Lookup(pod)
	if !found || !prof.Usable {
		return Estimate{}, 0, false
	}
	return Estimate{MilliCPU: prof.EstimateMilliCPU, MemoryBytes: prof.EstimateMemoryBytes}, prof.MeanMilliCPU, true
}

// NamespaceRatio is the use-to-request ratio of pod's namespace and pod's CPU request, with
// found false when the namespace has no measured pod or the pod no CPU request. One map lookup
// and the pod's requests (PreScore, Reserve, the record; not per node).
func (p *Profiles) NamespaceRatio(pod *v1.Pod) (r workloadprofile.Ratio, reqMilliCPU int64, found bool) {
	if p == nil || pod == nil {
		return r, 0, false
	}
	m := p.ratios.Load()
	if m == nil {
		return r, 0, false
	}
	if r, found = (*m)[pod.Namespace]; !found {
		return r, 0, false
	}
	reqMilliCPU = cpuRequest(pod)
	return r, reqMilliCPU, reqMilliCPU > 0
}

// NamespaceEstimate is pod's CPU estimate from its namespace's ratio when that is usable (see
// workloadprofile.Ratio.Estimate), with the mean it adds its margin to.
func (p *Profiles) NamespaceEstimate(pod *v1.Pod) (est int64, mean float64, ok bool) {
	r, req, found := p.NamespaceRatio(pod)
	if !found || !r.Usable {
		return 0, 0, false
	}
	est, mean, _ = r.Estimate(req, p.args.Margin)
	return est, mean, true
}

func cpuRequest(pod *v1.Pod) int64 {
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceCPU]
	return q.MilliValue()
}

// Learn feeds the learner every measured pod of snap bound to the node that reports it and
// publishes the profiles. capacity gives a node's capacity (zero: unknown, its pods are not
// learned: a share of an unknown capacity is no amount). A nil Profiles (profiles off)
// learns nothing.
func (p *Profiles) Learn(snap *Snapshot, capacity func(node string) Capacity, now time.Time) {
	if snap == nil || p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, e := range snap.nodes {
		if e.stale || e.shares == nil {
			continue
		}
		c := capacity(name)
		if c.MilliCPU <= 0 || c.MemoryBytes <= 0 {
			continue
		}
		for uid, share := range e.shares {
			ref, ok := p.pods[types.UID(uid)]
			if !ok || ref.node != name {
				continue
			}
			s, ok := sampleOf(share, c, e.updated.Sub(ref.bound), snap.Window, p.args.MinAge)
			if !ok {
				continue
			}
			if ref.hasKey {
				p.learner.Observe(ref.key, uid, s, e.updated, ref.bound)
			}
			if p.namespaces != nil && ref.reqMilliCPU > 0 {
				p.namespaces.Observe(ref.ns, uid, s.MilliCPU/float64(ref.reqMilliCPU), e.updated)
			}
		}
	}
	m := p.learner.Profiles(now)
	p.published.Store(&m)
	if p.namespaces != nil {
		r := p.namespaces.Ratios(now)
		p.ratios.Store(&r)
	}
}

// sampleOf is a pod's average use in absolute units. A pod its node's window has held for the
// whole window counts its window average. A younger one counts its latest share: its window
// average counts 0 for the samples before it ran, and how many those are depends on how long
// the agent has sampled, which the document does not say, so no scaling could undo it. One
// younger than minAge (workloadProfiles.minAgeSeconds) is not learned (a starting pod is not
// yet what it will use).
func sampleOf(share PodShare, c Capacity, age, window, minAge time.Duration) (workloadprofile.Sample, bool) {
	if age < minAge {
		return workloadprofile.Sample{}, false
	}
	cpu, mem := share.CPU, share.Memory
	if age < window {
		cpu, mem = share.LatestCPU, share.LatestMemory
	}
	return workloadprofile.Sample{
		MilliCPU:    cpu / 100 * float64(c.MilliCPU),
		MemoryBytes: mem / 100 * float64(c.MemoryBytes),
	}, true
}

func (p *Profiles) observe(pod *v1.Pod) {
	key, hasKey := workloadprofile.KeyOf(pod)
	// why every bound pod, not only a workload's: bare pods teach their namespace's ratio.
	if pod.Spec.NodeName == "" || (!hasKey && p.namespaces == nil) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if terminal(pod) || pod.DeletionTimestamp != nil {
		delete(p.pods, pod.UID)
		return
	}
	p.pods[pod.UID] = podRef{key: key, hasKey: hasKey, ns: pod.Namespace, reqMilliCPU: cpuRequest(pod),
		node: pod.Spec.NodeName, bound: bindTime(pod)}
}

func (p *Profiles) forget(uid types.UID) {
	p.mu.Lock()
	delete(p.pods, uid)
	p.mu.Unlock()
}

// EventHandler keeps the pod index in step with the scheduler's pod informer. A restarted
// scheduler lists every pod again and learns from the watcher's next document: nothing is
// guessed in between.
func (p *Profiles) EventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pod, ok := obj.(*v1.Pod); ok {
				p.observe(pod)
			}
		},
		UpdateFunc: func(_, newObj interface{}) {
			if pod, ok := newObj.(*v1.Pod); ok {
				p.observe(pod)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				p.forget(pod.UID)
			}
		},
	}
}
