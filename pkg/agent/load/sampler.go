package load

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Windows are the statistics windows the agent reports, shortest first; they match the
// load-watcher windows so the watcher can serve any of them without resampling.
var Windows = []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute}

// WindowStats is one window's summary of both resources.
type WindowStats struct {
	CPU    Stats
	Memory Stats
}

// Sampler reads utilisation from a /proc tree at a fixed interval into a bounded ring, and,
// when given pods and a cgroup hierarchy (SetPods), each pod's share of the node alongside.
type Sampler struct {
	root     string
	interval time.Duration
	windows  []time.Duration
	now      func() time.Time
	// OnSample, if set, sees every recorded sample (used for the Prometheus gauges). Set before Run.
	OnSample func(Sample)
	// OnError, if set, sees every failed read. Set before Run.
	OnError func(error)

	mu       sync.Mutex
	ring     *Ring
	prev     CPUTimes
	havePrev bool
	pods     podSampler
}

// NewSampler samples root (a /proc directory) every interval and keeps enough samples for the
// longest window in Windows.
func NewSampler(root string, interval time.Duration) *Sampler {
	return NewSamplerWindows(root, interval, Windows)
}

// NewSamplerWindows is NewSampler with other window lengths (as many as Windows, shortest
// first; they are still reported under Windows' names). Why: a benchmark that compresses time
// scales the windows with its arrivals, so their ratio stays that of a real cluster.
func NewSamplerWindows(root string, interval time.Duration, windows []time.Duration) *Sampler {
	if interval <= 0 {
		interval = time.Second
	}
	if len(windows) != len(Windows) {
		windows = Windows
	}
	longest := windows[len(windows)-1]
	// +2: one for the boundary sample and one for timer jitter, so the longest window is full.
	capacity := int(longest/interval) + 2
	return &Sampler{root: root, interval: interval, windows: windows, now: time.Now, ring: NewRing(capacity)}
}

// WindowLengths are the sampler's windows, in Windows' order.
func (s *Sampler) WindowLengths() []time.Duration { return s.windows }

// Backfill fills the ring with samples of cpu % and mem %, one per interval, covering the
// longest window up to the newest sample or now: a node that has been at its base load for a
// while (benchmarks that must not start from empty windows). No pod shares are made up.
func (s *Sampler) Backfill(cpu, mem float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := s.now()
	if last, ok := s.ring.Last(); ok {
		end = last.Time
	}
	n := s.ring.Cap() - 1 - s.ring.Len()
	if n <= 0 {
		return
	}
	old := make([]Sample, 0, s.ring.Len())
	s.ring.Since(time.Time{}, func(x Sample) { old = append(old, x) })
	start := end.Add(-time.Duration(n+len(old)) * s.interval)
	r := NewRing(s.ring.Cap())
	for i := range n {
		r.Push(Sample{Time: start.Add(time.Duration(i+1) * s.interval), CPU: cpu, Memory: mem})
	}
	for _, x := range old {
		r.Push(x)
	}
	s.ring = r
}

// SetClock replaces time.Now (tests).
func (s *Sampler) SetClock(now func() time.Time) { s.now = now }

// Capacity is the ring's fixed size.
func (s *Sampler) Capacity() int { return s.ring.Cap() }

// SampleOnce reads /proc once. The first call only primes the CPU counters (a utilisation
// needs two readings) and records nothing; recorded reports whether a sample was stored.
func (s *Sampler) SampleOnce() (sample Sample, recorded bool, err error) {
	cpu, err := ReadCPU(s.root)
	if err != nil {
		return Sample{}, false, err
	}
	mem, err := ReadMemory(s.root)
	if err != nil {
		return Sample{}, false, err
	}
	// Right after the node's counters, so pod and node deltas cover nearly the same time.
	readings := s.pods.read()
	now := s.now()
	s.mu.Lock()
	prev, havePrev := s.prev, s.havePrev
	s.prev, s.havePrev = cpu, true
	if !havePrev {
		s.pods.prime(readings)
		s.mu.Unlock()
		return Sample{}, false, nil
	}
	pct, ok := CPUUtilisation(prev, cpu)
	if !ok {
		s.pods.prime(readings)
		s.mu.Unlock()
		return Sample{}, false, nil
	}
	sample = Sample{Time: now, CPU: pct, Memory: mem.Utilisation()}
	s.ring.Push(sample)
	s.pods.record(readings, now, cpu.Total-prev.Total, cpu.CPUs, mem.TotalKB, s.ring.Cap())
	s.mu.Unlock()
	return sample, true, nil
}

// Run samples until ctx is done.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.tick()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) tick() {
	sample, ok, err := s.SampleOnce()
	if err != nil {
		klog.ErrorS(err, "Reading node load failed", "procRoot", s.root)
		if s.OnError != nil {
			s.OnError(err)
		}
		return
	}
	if ok && s.OnSample != nil {
		s.OnSample(sample)
	}
}

// Last is the newest sample.
func (s *Sampler) Last() (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ring.Last()
}

// Stats summarises every window of the sampler (Windows unless made otherwise), ending at now. A window with no samples has N = 0.
func (s *Sampler) Stats(now time.Time) map[time.Duration]WindowStats {
	out := make(map[time.Duration]WindowStats, len(s.windows))
	cpu := make([]float64, 0, s.ring.Cap())
	mem := make([]float64, 0, s.ring.Cap())
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.windows {
		cpu, mem = cpu[:0], mem[:0]
		s.ring.Since(now.Add(-w), func(x Sample) {
			if x.Time.After(now) {
				return
			}
			cpu = append(cpu, x.CPU)
			mem = append(mem, x.Memory)
		})
		out[w] = WindowStats{CPU: Compute(cpu), Memory: Compute(mem)}
	}
	return out
}
