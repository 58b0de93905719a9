package load

import (
	"math"
	"testing"
	"time"
)

func TestCompute(t *testing.T) {
	seq := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[n-1-i] = float64(i + 1) // descending, so Compute must sort
		}
		return v
	}
	tests := []struct {
		name string
		in   []float64
		want Stats
	}{
		{"empty means no data", nil, Stats{}},
		{"single", []float64{42}, Stats{Avg: 42, Std: 0, P95: 42, N: 1}},
		{"constant", []float64{10, 10, 10, 10}, Stats{Avg: 10, Std: 0, P95: 10, N: 4}},
		// population std of {2,4,4,4,5,5,7,9} is exactly 2; p95 by nearest rank is rank 8 → 9.
		{"textbook", []float64{2, 4, 4, 4, 5, 5, 7, 9}, Stats{Avg: 5, Std: 2, P95: 9, N: 8}},
		// 1..100: rank ceil(95) = 95; std = sqrt((100²−1)/12).
		{"1..100", seq(100), Stats{Avg: 50.5, Std: math.Sqrt((100*100 - 1) / 12.0), P95: 95, N: 100}},
		// 1..20: rank ceil(19) = 19.
		{"1..20", seq(20), Stats{Avg: 10.5, Std: math.Sqrt((20*20 - 1) / 12.0), P95: 19, N: 20}},
		// 1..10: rank ceil(9.5) = 10: the top value.
		{"1..10", seq(10), Stats{Avg: 5.5, Std: math.Sqrt((10*10 - 1) / 12.0), P95: 10, N: 10}},
		{"spike", []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 100}, Stats{Avg: 10, Std: 30, P95: 100, N: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(tc.in)
			if got.N != tc.want.N || math.Abs(got.Avg-tc.want.Avg) > 1e-9 || math.Abs(got.Std-tc.want.Std) > 1e-9 || got.P95 != tc.want.P95 {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRingBounds(t *testing.T) {
	r := NewRing(5)
	base := time.Unix(1000, 0)
	for i := 0; i < 12; i++ {
		r.Push(Sample{Time: base.Add(time.Duration(i) * time.Second), CPU: float64(i)})
		if r.Len() > r.Cap() {
			t.Fatalf("len %d over cap %d", r.Len(), r.Cap())
		}
	}
	if r.Len() != 5 {
		t.Fatalf("len %d, want 5", r.Len())
	}
	var got []float64
	r.Since(time.Time{}, func(s Sample) { got = append(got, s.CPU) })
	want := []float64{7, 8, 9, 10, 11}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v (oldest first, newest kept)", got, want)
		}
	}
	if last, _ := r.Last(); last.CPU != 11 {
		t.Fatalf("last %v, want 11", last.CPU)
	}
	got = nil
	r.Since(base.Add(9*time.Second), func(s Sample) { got = append(got, s.CPU) })
	if len(got) != 2 || got[0] != 10 {
		t.Fatalf("Since(9s) = %v, want [10 11]", got)
	}
	if NewRing(0).Cap() != 1 {
		t.Fatal("a zero capacity must still hold one sample")
	}
}
