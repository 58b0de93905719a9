package load_test

import (
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/agent/load"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
)

// podHarness is a fixture node with cgroups, a sampler reading its pods on a fake clock, and the
// pod errors it counted.
type podHarness struct {
	n    *fixture.Node
	s    *load.Sampler
	now  time.Time
	mu   sync.Mutex
	errs map[string]int
	refs []load.PodRef
}

func newPodHarness(t *testing.T, max int, windows []time.Duration) *podHarness {
	t.Helper()
	dir := t.TempDir()
	n, err := fixture.New(filepath.Join(dir, "proc"), 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.EnableCgroups(filepath.Join(dir, "cgroup")); err != nil {
		t.Fatal(err)
	}
	if err := n.SetCPUs(8); err != nil {
		t.Fatal(err)
	}
	h := &podHarness{n: n, now: time.Unix(1_800_000_000, 0), errs: map[string]int{}}
	h.s = load.NewSamplerWindows(n.Root, time.Second, windows)
	h.s.SetClock(func() time.Time { return h.now })
	h.s.SetPods(load.NewCgroups(n.CgroupRoot()), func() []load.PodRef { return h.refs }, max, func(e *load.PodError) {
		h.mu.Lock()
		h.errs[e.Reason]++
		h.mu.Unlock()
	})
	return h
}

// step advances the fixture once and samples one second later.
func (h *podHarness) step(t *testing.T) {
	t.Helper()
	if err := h.n.Advance(); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(time.Second)
	if _, _, err := h.s.SampleOnce(); err != nil {
		t.Fatal(err)
	}
}

func statOf(stats []load.PodStat, uid string) (load.PodStat, bool) {
	for _, s := range stats {
		if s.UID == uid {
			return s, true
		}
	}
	return load.PodStat{}, false
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.01 }

func TestPodSharesAndWindows(t *testing.T) {
	// Windows of 4, 8 and 10 samples: a pod that joins after 6 samples holds 4/10 of its use
	// in the longest window's average.
	h := newPodHarness(t, 0, []time.Duration{4 * time.Second, 8 * time.Second, 10 * time.Second})
	h.step(t) // primes the node counters
	for range 6 {
		h.step(t)
	}
	a := fixture.Pod{UID: "pod-a", QOS: "burstable", CPU: 20, MemoryBytes: 1 << 30}
	if err := h.n.SetPods([]fixture.Pod{a}); err != nil {
		t.Fatal(err)
	}
	h.refs = []load.PodRef{{UID: "pod-a", QOS: "Burstable"}}
	h.step(t) // primes the pod's counters: no share yet
	if st := h.s.PodStats(h.now); len(st) != 0 {
		t.Fatalf("a pod's first reading only primes, got %+v", st)
	}
	for range 4 {
		h.step(t)
	}
	st, ok := statOf(h.s.PodStats(h.now), "pod-a")
	if !ok {
		t.Fatal("pod-a missing")
	}
	memPct := 100 * float64(1<<30) / (fixture.MemTotalKB * 1024)
	if !near(st.Latest.CPU, 20) || !near(st.Latest.Memory, memPct) {
		t.Fatalf("latest = %+v, want cpu 20 %%, memory %.3f %%", st.Latest, memPct)
	}
	if st.MilliCPU != 1600 || st.MemoryBytes != 1<<30 {
		t.Fatalf("absolute = %dm %dB, want 1600m (20 %% of 8 CPUs) and 1 GiB", st.MilliCPU, st.MemoryBytes)
	}
	// 4 of the windows' samples hold the pod: 4/4, 4/8 and 4/10 of its use.
	for i, frac := range []float64{1, 0.5, 0.4} {
		if !near(st.CPU[i], 20*frac) || !near(st.Memory[i], memPct*frac) {
			t.Errorf("window %d: cpu %.3f mem %.3f, want %.3f %.3f", i, st.CPU[i], st.Memory[i], 20*frac, memPct*frac)
		}
	}
	// A pod no longer listed is forgotten.
	h.refs = nil
	h.step(t)
	if st := h.s.PodStats(h.now); len(st) != 0 {
		t.Fatalf("unlisted pod still reported: %+v", st)
	}
}

func TestHostilePodCgroups(t *testing.T) {
	h := newPodHarness(t, 2, nil)
	pods := []fixture.Pod{{UID: "a", CPU: 10, MemoryBytes: 100}, {UID: "b", CPU: 10, MemoryBytes: 100}, {UID: "c", CPU: 5}}
	if err := h.n.SetPods(pods); err != nil {
		t.Fatal(err)
	}
	// "c" is over the bound of 2 pods; "gone" has no cgroup.
	h.refs = []load.PodRef{{UID: "c"}, {UID: "b"}, {UID: "a"}}
	h.step(t)
	h.step(t)
	h.step(t)
	if st := h.s.PodStats(h.now); len(st) != 2 || st[0].UID != "a" || st[1].UID != "b" {
		t.Fatalf("want a and b (the first 2 by UID), got %+v", st)
	}
	if h.errs[load.PodTooMany] == 0 {
		t.Fatalf("the pod over the bound was not counted: %v", h.errs)
	}
	cg := filepath.Join(h.n.CgroupRoot(), "kubepods")
	// b: garbage; a: counter goes backwards. The node's sample still goes out.
	h.n.SetPods(pods[:2])
	if err := h.n.Advance(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(cg, "podb", "cpu.stat"), []byte("usage_usec ???\n"), 0o644)
	os.WriteFile(filepath.Join(cg, "poda", "cpu.stat"), []byte("usage_usec 1\n"), 0o644)
	h.now = h.now.Add(time.Second)
	if _, ok, err := h.s.SampleOnce(); !ok || err != nil {
		t.Fatalf("node sample lost over bad pod cgroups: ok=%v err=%v", ok, err)
	}
	if st := h.s.PodStats(h.now); len(st) != 0 {
		t.Fatalf("bad pods reported: %+v", st)
	}
	if h.errs[load.PodGarbage] != 1 || h.errs[load.PodRange] != 1 {
		t.Fatalf("errors = %v, want one garbage and one range", h.errs)
	}
	// Huge: a jump of more CPU time than the node had.
	h.step(t)
	h.step(t)
	h.n.Advance()
	os.WriteFile(filepath.Join(cg, "poda", "cpu.stat"), []byte("usage_usec 9000000000000\n"), 0o644)
	h.now = h.now.Add(time.Second)
	h.s.SampleOnce()
	if h.errs[load.PodRange] != 2 {
		t.Fatalf("errors = %v, want a second range error for a huge value", h.errs)
	}
	// Gone mid-read: the directory disappears; counted, and the others stay.
	os.RemoveAll(filepath.Join(cg, "podb"))
	h.now = h.now.Add(time.Second)
	h.n.Advance()
	os.RemoveAll(filepath.Join(cg, "podb"))
	h.s.SampleOnce()
	if h.errs[load.PodGone] == 0 {
		t.Fatalf("a vanished cgroup was not counted: %v", h.errs)
	}
}

func TestBackfill(t *testing.T) {
	n, err := fixture.New(t.TempDir(), 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	s := load.NewSamplerWindows(n.Root, time.Second, []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second})
	s.SetClock(func() time.Time { return now })
	s.Backfill(30, 40)
	st := s.Stats(now)
	w := st[20*time.Second]
	if w.CPU.N != 20 || !near(w.CPU.Avg, 30) || !near(w.Memory.Avg, 40) {
		t.Fatalf("backfilled 20 s window = %+v, want 20 samples of 30 %% / 40 %%", w)
	}
	// Real samples follow the backfilled ones and push them out.
	s.SampleOnce()
	for range 5 {
		n.Advance()
		now = now.Add(time.Second)
		s.SampleOnce()
	}
	if w := s.Stats(now)[5*time.Second]; w.CPU.N != 5 || !near(w.CPU.Avg, 10) {
		t.Fatalf("5 s window after 5 real samples = %+v, want 10 %%", w)
	}
}
