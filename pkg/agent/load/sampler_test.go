package load_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/agent/load"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
)

func TestSamplerOnFixture(t *testing.T) {
	n, err := fixture.New(t.TempDir(), 25, 60)
	if err != nil {
		t.Fatal(err)
	}
	s := load.NewSampler(n.Root, time.Second)
	if _, ok, err := s.SampleOnce(); ok || err != nil {
		t.Fatalf("first sample must only prime the counters: ok=%v err=%v", ok, err)
	}
	// Without an Advance the counters have not moved: no information, no sample.
	if _, ok, _ := s.SampleOnce(); ok {
		t.Fatal("a sample was recorded although the CPU counters did not move")
	}
	for _, tc := range []struct{ cpu, mem float64 }{{25, 60}, {80, 10}, {0, 0}, {100, 100}, {33.33, 50}} {
		if err := n.Set(tc.cpu, tc.mem); err != nil {
			t.Fatal(err)
		}
		n.Advance()
		n.Advance() // two steps between readings still give the same percentage
		got, ok, err := s.SampleOnce()
		if err != nil || !ok {
			t.Fatalf("sample: ok=%v err=%v", ok, err)
		}
		if math.Abs(got.CPU-tc.cpu) > 0.01 || math.Abs(got.Memory-tc.mem) > 0.01 {
			t.Fatalf("sample cpu=%.3f mem=%.3f, want %v %v", got.CPU, got.Memory, tc.cpu, tc.mem)
		}
	}
	if err := n.Set(101, 0); err == nil {
		t.Fatal("fixture accepted 101 %")
	}
}

func TestSamplerWindows(t *testing.T) {
	n, err := fixture.New(t.TempDir(), 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	s := load.NewSampler(n.Root, time.Second)
	now := time.Unix(1_700_000_000, 0)
	s.SetClock(func() time.Time { return now })
	s.SampleOnce()
	// 12 minutes at 10 % CPU, then 3 minutes at 90 %, one sample a second.
	for i := 0; i < 15*60; i++ {
		now = now.Add(time.Second)
		if i == 12*60 {
			n.Set(90, 20)
		}
		n.Advance()
		if _, ok, err := s.SampleOnce(); !ok || err != nil {
			t.Fatalf("sample %d: ok=%v err=%v", i, ok, err)
		}
	}
	if s.Capacity() < 15*60 || s.Capacity() > 15*60+5 {
		t.Fatalf("ring capacity %d, want just above 900 for 15 min at 1 s", s.Capacity())
	}
	st := s.Stats(now)
	// 5m: 120 s at 10 % + 180 s at 90 % → avg 58, std = 80·sqrt(0.4·0.6), p95 = 90.
	// 15m: 720 at 10 + 180 at 90 → avg 26, std = 80·sqrt(0.8·0.2) = 32.
	check := func(w time.Duration, n int, avg, std, p95 float64) {
		t.Helper()
		c := st[w].CPU
		if c.N != n || math.Abs(c.Avg-avg) > 1e-6 || math.Abs(c.Std-std) > 1e-6 || c.P95 != p95 {
			t.Fatalf("%s: got %+v, want n=%d avg=%v std=%v p95=%v", w, c, n, avg, std, p95)
		}
		// MemAvailable is whole kB, so 20 % of 16 GiB is exact only to about 1e-6 %.
		if m := st[w].Memory; math.Abs(m.Avg-20) > 1e-4 || m.Std > 1e-6 {
			t.Fatalf("%s memory %+v, want constant 20", w, m)
		}
	}
	check(5*time.Minute, 300, 58, 80*math.Sqrt(0.4*0.6), 90)
	check(10*time.Minute, 600, (420*10+180*90)/600.0, 80*math.Sqrt(0.7*0.3), 90)
	check(15*time.Minute, 900, 26, 32, 90)

	// Far in the future every sample has left the windows: no data, not zero load.
	if st := s.Stats(now.Add(time.Hour)); st[15*time.Minute].CPU.N != 0 {
		t.Fatalf("stale samples still counted: %+v", st[15*time.Minute])
	}
}

func TestFixtureRunKeepsUtilisation(t *testing.T) {
	n, err := fixture.New(t.TempDir(), 25, 75)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx, 5*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	s := load.NewSampler(n.Root, 20*time.Millisecond)
	var got []load.Sample
	// why: stop on the fifth sample, not after a fixed time; a loaded CI machine running the
	// race detector may take far longer than 5 × 20 ms, which says nothing about the sampler.
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	s.OnSample = func(x load.Sample) {
		if got = append(got, x); len(got) == 5 {
			scancel()
		}
	}
	s.Run(sctx)
	if len(got) < 5 {
		t.Fatalf("only %d samples in 30 s at 20 ms", len(got))
	}
	for _, x := range got {
		if math.Abs(x.CPU-25) > 0.01 || math.Abs(x.Memory-75) > 0.01 {
			t.Fatalf("sample %+v, want 25 %% CPU, 75 %% memory", x)
		}
	}
}
