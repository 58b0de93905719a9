package workloadprofile

import (
	"fmt"
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configv1 "github.com/berth-sched/berth/api/config/v1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func pod(ns string, labels map[string]string, refs ...metav1.OwnerReference) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: labels, OwnerReferences: refs}}
}

func ref(uid string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{Kind: "ReplicaSet", Name: "rs", UID: types.UID(uid), Controller: &controller}
}

func TestKeyOf(t *testing.T) {
	hash := map[string]string{PodTemplateHashLabel: "abc"}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want Key
		ok   bool
	}{
		{"bare pod", pod("a", nil), Key{}, false},
		{"owner that is not the controller", pod("a", nil, ref("u1", false)), Key{}, false},
		{"controller with template hash", pod("a", hash, ref("u1", true)), Key{"a", "u1", "abc"}, true},
		{"statefulset revision", pod("a", map[string]string{ControllerRevisionHashLabel: "r7"}, ref("u2", true)), Key{"a", "u2", "r7"}, true},
		{"controller after a non-controller", pod("a", nil, ref("u0", false), ref("u1", true)), Key{"a", "u1", ""}, true},
		// A pod in namespace b naming namespace a's controller UID gets a key of b: it can
		// never join a's profile.
		{"forged owner in another namespace", pod("b", hash, ref("u1", true)), Key{"b", "u1", "abc"}, true},
		{"empty owner UID", pod("a", nil, ref("", true)), Key{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := KeyOf(tc.pod)
			if got != tc.want || ok != tc.ok {
				t.Errorf("KeyOf = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestProfiles(t *testing.T) {
	a := Key{"a", "u1", "h1"}
	type obs struct {
		k   Key
		uid string
		cpu float64
	}
	alike := []obs{{a, "p1", 100}, {a, "p2", 110}, {a, "p3", 95}}
	for _, tc := range []struct {
		name       string
		obs        []obs
		key        Key
		wantUsable bool
		wantReason string
		wantCPU    float64
		wantN      int
	}{
		{"alike siblings make a profile", alike, a, true, "", 110, 3},
		{"too few siblings", alike[:2], a, false, ReasonTooFew, 110, 2},
		{"one hot replica and idle rest: no profile", []obs{{a, "p1", 1000}, {a, "p2", 5}, {a, "p3", 5}}, a, false, ReasonUnlike, 1000, 3},
		{"a pod measured again counts once", append(alike[:2:2], obs{a, "p1", 120}), a, false, ReasonTooFew, 120, 2},
		// Same controller UID and hash in namespace b (a forged reference) learns apart.
		{"other namespace is another profile", append(alike[:2:2], obs{Key{"b", "u1", "h1"}, "x", 5000}), a, false, ReasonTooFew, 110, 2},
		{"new template is another profile", append(alike[:2:2], obs{Key{"a", "u1", "h2"}, "p3", 95}), a, false, ReasonTooFew, 110, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLearner(DefaultArgs())
			for i, o := range tc.obs {
				l.Observe(o.k, o.uid, Sample{MilliCPU: o.cpu, MemoryBytes: 1 << 20}, t0.Add(time.Duration(i)*time.Second), time.Time{})
			}
			p, ok := l.Profiles(t0.Add(time.Minute))[tc.key]
			if !ok {
				t.Fatalf("no profile for %v", tc.key)
			}
			if p.Usable != tc.wantUsable || p.Reason != tc.wantReason || p.MilliCPU != tc.wantCPU || p.Samples != tc.wantN {
				t.Errorf("profile = %+v; want usable %v reason %q cpu %v samples %d", p, tc.wantUsable, tc.wantReason, tc.wantCPU, tc.wantN)
			}
		})
	}
}

// The estimate is the percentile plus margin × spread of it, rounded up.
func TestEstimateMargin(t *testing.T) {
	args := DefaultArgs()
	args.Margin = 2
	l := NewLearner(args)
	k := Key{"a", "u", ""}
	for i, c := range []float64{80, 100, 120} {
		l.Observe(k, fmt.Sprint(i), Sample{MilliCPU: c, MemoryBytes: 100}, t0, time.Time{})
	}
	p := l.Profiles(t0)[k]
	cv := math.Sqrt(800.0/3) / 100
	if want := int64(math.Ceil(120 * (1 + 2*cv))); p.EstimateMilliCPU != want || p.EstimateMemoryBytes != 100 || !p.Usable {
		t.Errorf("estimate = %dm / %d B usable %v; want %dm / 100 B usable", p.EstimateMilliCPU, p.EstimateMemoryBytes, p.Usable, want)
	}
	// The mean the engine pools replicas around: not the percentile.
	if p.MeanMilliCPU != 100 {
		t.Errorf("mean = %vm, want 100m", p.MeanMilliCPU)
	}
}

func TestGarbageNeverLearned(t *testing.T) {
	l := NewLearner(DefaultArgs())
	k := Key{"a", "u", ""}
	for i, s := range []Sample{{MilliCPU: math.NaN()}, {MilliCPU: math.Inf(1)}, {MilliCPU: -1}, {MemoryBytes: -5}} {
		l.Observe(k, fmt.Sprint(i), s, t0, time.Time{})
	}
	if w, n := l.Len(); w != 0 || n != 0 {
		t.Errorf("garbage learned: %d workloads, %d samples", w, n)
	}
}

// Thousands of short pods of one workload, and thousands of workloads: the bounds hold and the
// least recently measured go first.
func TestChurnStaysBounded(t *testing.T) {
	args := DefaultArgs()
	args.MaxWorkloads, args.MaxSamples = 50, 8
	l := NewLearner(args)
	churn := Key{"a", "churn", ""}
	for i := range 5000 {
		l.Observe(churn, fmt.Sprint("pod-", i), Sample{MilliCPU: float64(i)}, t0.Add(time.Duration(i)*time.Second), time.Time{})
		l.Observe(Key{"a", fmt.Sprint("w", i), ""}, "p", Sample{MilliCPU: 1}, t0.Add(time.Duration(i)*time.Second), time.Time{})
		if w, n := l.Len(); w > args.MaxWorkloads || n > args.MaxWorkloads*args.MaxSamples {
			t.Fatalf("after %d pods: %d workloads, %d samples over the bound", i, w, n)
		}
	}
	ps := l.Profiles(t0.Add(5000 * time.Second))
	p, ok := ps[churn]
	if !ok {
		t.Fatal("the workload measured most recently was evicted")
	}
	// The 8 newest pods are 4992..4999: the oldest went first.
	if p.Samples != 8 || p.MilliCPU != 4999 {
		t.Errorf("churned profile = %d samples, p90 %v; want 8 samples of the newest pods (p90 4999)", p.Samples, p.MilliCPU)
	}
	if _, ok := ps[Key{"a", "w0", ""}]; ok {
		t.Error("the least recently measured workload was kept")
	}
	if _, ok := ps[Key{"a", "w4999", ""}]; !ok {
		t.Error("the most recently measured workload was dropped")
	}
}

func TestOldSamplesAgeOut(t *testing.T) {
	l := NewLearner(DefaultArgs())
	k := Key{"a", "u", ""}
	l.Observe(k, "old", Sample{MilliCPU: 1}, t0, time.Time{})
	l.Observe(k, "new", Sample{MilliCPU: 2}, t0.Add(50*time.Minute), time.Time{})
	ps := l.Profiles(t0.Add(61 * time.Minute))
	if p := ps[k]; p.Samples != 1 || p.MilliCPU != 2 {
		t.Errorf("profile = %+v; want only the sample within MaxAge", p)
	}
	if ps = l.Profiles(t0.Add(200 * time.Minute)); len(ps) != 0 {
		t.Errorf("workload without samples kept: %v", ps)
	}
	if w, _ := l.Len(); w != 0 {
		t.Errorf("%d workloads held after all samples aged out", w)
	}
}

func TestArgsValidate(t *testing.T) {
	if err := DefaultArgs().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Args)
	}{
		{"minSiblings 0", func(a *Args) { a.MinSiblings = 0 }},
		{"percentile 0", func(a *Args) { a.Percentile = 0 }},
		{"percentile NaN", func(a *Args) { a.Percentile = math.NaN() }},
		{"percentile 101", func(a *Args) { a.Percentile = 101 }},
		{"maxSpread negative", func(a *Args) { a.MaxSpread = -1 }},
		{"margin Inf", func(a *Args) { a.Margin = math.Inf(1) }},
		{"maxSamples below minSiblings", func(a *Args) { a.MaxSamples = 2 }},
		{"maxWorkloads 0", func(a *Args) { a.MaxWorkloads = 0 }},
		{"maxAge 0", func(a *Args) { a.MaxAge = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := DefaultArgs()
			tc.mod(&a)
			if err := a.Validate(); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// Ramp: pods seen starting ramp up over successive samples; the profile says how long they took
// (median) to come within 10 % of their use. A pod first measured long after binding (learned
// after a restart) says nothing about it.
func TestRamp(t *testing.T) {
	k := Key{"a", "u", ""}
	for _, tc := range []struct {
		name string
		// per pod: bind offset, then samples at offsets (minutes after t0)
		pods map[string][]float64
		bind map[string]time.Duration
		want time.Duration
	}{
		{"three ramping pods", map[string][]float64{"a": {10, 50, 100, 100}, "b": {100, 100, 100, 100}, "c": {10, 20, 95, 100}},
			map[string]time.Duration{"a": 0, "b": 0, "c": 0}, 3 * time.Minute}, // reached at 3, 1, 3 min after binding
		{"learned after a restart: unknown", map[string][]float64{"a": {100, 100, 100, 100}},
			map[string]time.Duration{"a": -time.Hour}, 0},
		{"a drop after reaching does not reset it", map[string][]float64{"a": {100, 50, 100, 95}},
			map[string]time.Duration{"a": 0}, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLearner(DefaultArgs())
			for uid, cpus := range tc.pods {
				for i, c := range cpus {
					l.Observe(k, uid, Sample{MilliCPU: c}, t0.Add(time.Duration(i+1)*time.Minute), t0.Add(tc.bind[uid]))
				}
			}
			if got := l.Profiles(t0.Add(10 * time.Minute))[k].Ramp; got != tc.want {
				t.Errorf("ramp %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFromConfig: the configuration's integer units become the learner's, nil is the
// defaults, and Enabled says whether profiles run.
func TestFromConfig(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	off := false
	for _, tc := range []struct {
		name   string
		in     *configv1.WorkloadProfileArgs
		want   Args
		wantOn bool
	}{
		{"nil", nil, DefaultArgs(), true},
		{"units", &configv1.WorkloadProfileArgs{MinSiblings: i32(5), Percentile: i32(95), MaxSpreadPercent: i32(25),
			MarginPercent: i32(150), MaxWorkloads: i32(7), MaxSamples: i32(8), MaxAgeSeconds: new(int64(60)), MinAgeSeconds: new(int64(4)),
			NamespaceMinPods: i32(0)},
			Args{MinSiblings: 5, Percentile: 95, MaxSpread: 0.25, Margin: 1.5, MaxWorkloads: 7, MaxSamples: 8, MaxAge: time.Minute, MinAge: 4 * time.Second}, true},
		{"off", &configv1.WorkloadProfileArgs{Enabled: &off}, DefaultArgs(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, on := FromConfig(tc.in)
			if got != tc.want || on != tc.wantOn {
				t.Fatalf("FromConfig = %+v, %v; want %+v, %v", got, on, tc.want, tc.wantOn)
			}
		})
	}
}
