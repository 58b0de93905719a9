package load

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// nanosPerJiffy converts /proc/stat counters (USER_HZ = 100 on every architecture Linux runs
// Kubernetes on) into the nanoseconds cgroups count CPU time in.
const nanosPerJiffy = 1e7

// rangeSlack tolerates the few tenths of a point a pod's share can exceed the node's when the
// two are read a few microseconds apart.
const rangeSlack = 2.0

// podSampler is the Sampler's per-pod part. Its configuration is set before Run; prev and
// series are guarded by the Sampler's mutex.
type podSampler struct {
	cg      *Cgroups
	list    func() []PodRef
	max     int
	onError func(*PodError)

	prev   map[string]PodCounters
	series map[string]*podSeries
}

// podSeries is one pod's shares, one per node sample it was read at.
type podSeries struct {
	ring *Ring
	// last is the newest share; milli the same CPU in millicores, bytes the memory read.
	last  Sample
	milli int64
	bytes uint64
}

type podReading struct {
	uid string
	c   PodCounters
	ok  bool
}

// SetPods makes the sampler read the cgroups of the pods list returns, at most max of them
// (0: no bound), every sample. onError, if set, sees every pod left out of a sample. Call
// before Run.
func (s *Sampler) SetPods(cg *Cgroups, list func() []PodRef, max int, onError func(*PodError)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods = podSampler{cg: cg, list: list, max: max, onError: onError,
		prev: map[string]PodCounters{}, series: map[string]*podSeries{}}
}

func (p *podSampler) fail(e *PodError) {
	if p.onError != nil {
		p.onError(e)
	}
}

// read reads every listed pod's cgroup; no lock held (file reads).
func (p *podSampler) read() []podReading {
	if p.cg == nil || p.list == nil {
		return nil
	}
	refs := p.list()
	if p.max > 0 && len(refs) > p.max {
		// Sorted, so the same pods are read every time and their windows stay whole.
		refs = slices.Clone(refs)
		slices.SortFunc(refs, func(a, b PodRef) int { return strings.Compare(a.UID, b.UID) })
		for _, r := range refs[p.max:] {
			p.fail(&PodError{UID: r.UID, Reason: PodTooMany, Err: fmt.Errorf("over the limit of %d pods", p.max)})
		}
		refs = refs[:p.max]
	}
	out := make([]podReading, 0, len(refs))
	for _, r := range refs {
		c, err := p.cg.Read(r)
		if err != nil {
			var pe *PodError
			if !errors.As(err, &pe) {
				pe = &PodError{UID: r.UID, Reason: PodGarbage, Err: err}
			}
			p.fail(pe)
			out = append(out, podReading{uid: r.UID})
			continue
		}
		out = append(out, podReading{uid: r.UID, c: c, ok: true})
	}
	return out
}

// prime keeps the readings as the base of the next deltas; nothing is recorded.
func (p *podSampler) prime(rs []podReading) {
	if p.prev == nil {
		return
	}
	clear(p.prev)
	for _, r := range rs {
		if r.ok {
			p.prev[r.uid] = r.c
		}
	}
}

// record turns the readings into shares of the node's sample at now: CPU over the node's
// dJiffies, memory over memTotalKB. Pods no longer listed are forgotten.
func (p *podSampler) record(rs []podReading, now time.Time, dJiffies uint64, cpus int, memTotalKB uint64, capacity int) {
	if p.prev == nil {
		return
	}
	listed := make(map[string]struct{}, len(rs))
	var errs []*PodError
	for _, r := range rs {
		listed[r.uid] = struct{}{}
		prev, had := p.prev[r.uid]
		delete(p.prev, r.uid)
		if !r.ok {
			continue // a delta across a failed read would span more than one node interval
		}
		p.prev[r.uid] = r.c
		if !had {
			continue
		}
		if r.c.CPUNanos < prev.CPUNanos {
			errs = append(errs, &PodError{UID: r.uid, Reason: PodRange, Err: errors.New("CPU counter went backwards")})
			continue
		}
		cpu := 100 * float64(r.c.CPUNanos-prev.CPUNanos) / (float64(dJiffies) * nanosPerJiffy)
		mem := 100 * float64(r.c.MemoryBytes) / (float64(memTotalKB) * 1024)
		if cpu > 100+rangeSlack || mem > 100+rangeSlack {
			errs = append(errs, &PodError{UID: r.uid, Reason: PodRange,
				Err: fmt.Errorf("cpu %.1f %%, memory %.1f %% of the node", cpu, mem)})
			continue
		}
		cpu, mem = min(cpu, 100), min(mem, 100)
		ps := p.series[r.uid]
		if ps == nil {
			ps = &podSeries{ring: NewRing(capacity)}
			p.series[r.uid] = ps
		}
		ps.last = Sample{Time: now, CPU: cpu, Memory: mem}
		ps.milli = int64(cpu / 100 * float64(cpus) * 1000)
		ps.bytes = r.c.MemoryBytes
		ps.ring.Push(ps.last)
	}
	for uid := range p.series {
		if _, ok := listed[uid]; !ok {
			delete(p.series, uid)
		}
	}
	for uid := range p.prev {
		if _, ok := listed[uid]; !ok {
			delete(p.prev, uid)
		}
	}
	for _, e := range errs {
		p.fail(e)
	}
}

// PodStat is one pod's usage as the sampler saw it, in percent of the node.
type PodStat struct {
	UID string
	// Latest is the pod's share in the node's newest sample.
	Latest Sample
	// MilliCPU and MemoryBytes are Latest in absolute units.
	MilliCPU    int64
	MemoryBytes uint64
	// CPU and Memory are the pod's averages over each window (the sampler's order), counting 0
	// for node samples the pod had no share in: the part of the node's average that is this pod.
	CPU, Memory []float64
}

// PodStats returns the pods read at the node's newest sample, sorted by UID, with their window
// averages ending at now. A pod not read at the newest sample (its cgroup failed) is left out:
// its numbers would be those of an older sample.
func (s *Sampler) PodStats(now time.Time) []PodStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.ring.Last()
	if !ok || len(s.pods.series) == 0 {
		return nil
	}
	counts := make([]int, len(s.windows))
	for i, w := range s.windows {
		s.ring.Since(now.Add(-w), func(x Sample) {
			if !x.Time.After(now) {
				counts[i]++
			}
		})
	}
	out := make([]PodStat, 0, len(s.pods.series))
	for uid, ps := range s.pods.series {
		if !ps.last.Time.Equal(last.Time) {
			continue
		}
		st := PodStat{UID: uid, Latest: ps.last, MilliCPU: ps.milli, MemoryBytes: ps.bytes,
			CPU: make([]float64, len(s.windows)), Memory: make([]float64, len(s.windows))}
		for i, w := range s.windows {
			if counts[i] == 0 {
				continue
			}
			var c, m float64
			ps.ring.Since(now.Add(-w), func(x Sample) {
				if !x.Time.After(now) {
					c += x.CPU
					m += x.Memory
				}
			})
			st.CPU[i], st.Memory[i] = c/float64(counts[i]), m/float64(counts[i])
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b PodStat) int { return strings.Compare(a.UID, b.UID) })
	return out
}
