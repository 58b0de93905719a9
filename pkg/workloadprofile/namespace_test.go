package workloadprofile

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// Each case feeds ratios (use ÷ request) and says what namespace "a" then reads.
func TestNamespaceRatios(t *testing.T) {
	at := time.Unix(1_000_000, 0)
	type obs struct {
		ns, uid string
		ratio   float64
		ago     time.Duration
	}
	many := func(ns string, n int, ratio float64) []obs {
		var out []obs
		for i := range n {
			out = append(out, obs{ns, fmt.Sprintf("%s-%d", ns, i), ratio, 0})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		minPods    int
		obs        []obs
		wantFound  bool
		wantUsable bool
		wantMean   float64
		wantSD     float64
		wantN      int
	}{
		{"five of ten: not usable, another namespace's never count", 10, append(many("a", 5, 0.2), many("b", 5, 9)...), true, false, 0.2, 0, 5},
		{"mean and deviation", 4, []obs{{"a", "1", 0.2, 0}, {"a", "2", 0.6, 0}, {"a", "3", 0.2, 0}, {"a", "4", 0.6, 0}}, true, true, 0.4, 0.2, 4},
		{"too few", 5, many("a", 4, 0.3), true, false, 0.3, 0, 4},
		{"off (0) is never usable", 0, many("a", 20, 0.3), true, false, 0.3, 0, 20},
		{"a pod measured again counts once, at its latest", 2, []obs{{"a", "1", 5, 0}, {"a", "1", 0.2, 0}, {"a", "2", 0.2, 0}}, true, true, 0.2, 0, 2},
		{"garbage is never learned", 1, []obs{{"a", "1", math.NaN(), 0}, {"a", "2", math.Inf(1), 0}, {"a", "3", -1, 0}, {"a", "4", 0.5, 0}}, true, true, 0.5, 0, 1},
		{"samples older than maxAge go", 1, []obs{{"a", "1", 9, 2 * time.Hour}, {"a", "2", 0.5, 0}}, true, true, 0.5, 0, 1},
		{"another namespace's pods never count", 1, many("b", 20, 0.1), false, false, 0, 0, 0},
		{"at most NamespaceMaxSamples pods, the oldest out first", 1,
			append([]obs{{"a", "old", 100, time.Minute}}, many("a", NamespaceMaxSamples, 0.5)...), true, true, 0.5, 0, NamespaceMaxSamples},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := DefaultArgs()
			args.NamespaceMinPods = tc.minPods
			l := NewNamespaceLearner(args)
			for _, o := range tc.obs {
				l.Observe(o.ns, o.uid, o.ratio, at.Add(-o.ago))
			}
			r, found := l.Ratios(at)["a"]
			if found != tc.wantFound || r.Usable != tc.wantUsable || r.Samples != tc.wantN ||
				math.Abs(r.Mean-tc.wantMean) > 1e-9 || math.Abs(r.SD-tc.wantSD) > 1e-9 {
				t.Fatalf("ratio %+v found %v; want found %v usable %v mean %g sd %g over %d", r, found, tc.wantFound, tc.wantUsable, tc.wantMean, tc.wantSD, tc.wantN)
			}
		})
	}
}

// Namespaces are bounded by MaxWorkloads: the least recently measured goes first.
func TestNamespaceBound(t *testing.T) {
	args := DefaultArgs()
	args.MaxWorkloads = 2
	l := NewNamespaceLearner(args)
	at := time.Unix(1_000_000, 0)
	l.Observe("a", "1", 0.1, at)
	l.Observe("b", "1", 0.1, at)
	l.Observe("a", "2", 0.1, at) // a measured again: b is the least recent
	l.Observe("c", "1", 0.1, at)
	got := l.Ratios(at)
	if _, ok := got["b"]; ok || len(got) != 2 {
		t.Fatalf("kept %v, want a and c", got)
	}
	if ns, samples := l.Len(); ns != 2 || samples != 3 {
		t.Fatalf("Len = %d, %d; want 2 namespaces, 3 samples", ns, samples)
	}
}

// Alone a pod counts at request × (mean + margin × SD), rounded up.
func TestRatioEstimate(t *testing.T) {
	r := Ratio{Mean: 0.25, SD: 0.1}
	for _, tc := range []struct {
		req      int64
		margin   float64
		want     int64
		mean, sd float64
	}{
		{1000, 1, 350, 250, 100},
		{1000, 0, 250, 250, 100},
		{333, 2, 150, 83.25, 33.3},
	} {
		est, mean, sd := r.Estimate(tc.req, tc.margin)
		if est != tc.want || math.Abs(mean-tc.mean) > 1e-9 || math.Abs(sd-tc.sd) > 1e-9 {
			t.Errorf("Estimate(%d, %g) = %d, %g, %g; want %d, %g, %g", tc.req, tc.margin, est, mean, sd, tc.want, tc.mean, tc.sd)
		}
	}
}
