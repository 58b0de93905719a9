package imagelocality

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	intree "k8s.io/kubernetes/pkg/scheduler/framework/plugins/imagelocality"
)

const dgA = "sha256:4c0fdaa8b6341bfdeca5f18f7837462c80cff90527ee35ef185571e1c327beac"
const dgB = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// placement puts images (fully-qualified tag → size) on the first k of the nodes.
type placement struct {
	tag  string
	size int64
	on   int // the first `on` nodes hold it
}

// TestFormulaVectors checks scores worked out by hand from the in-tree formula
//
//	sum(n)   = Σ_uses size × NumNodes/N (each use truncated to int64)
//	score    = 100 × (clamp(sum, 23 MiB, 1000 MiB × imageCount) − 23 MiB) / (1000 MiB × imageCount − 23 MiB)
//
// (integer division). The arithmetic of each vector is in its comment.
func TestFormulaVectors(t *testing.T) {
	cases := []struct {
		name     string
		nodes    int
		images   []placement
		pod      *v1.Pod
		noTie    bool
		want     map[string]int64 // node → score; nodes not listed want 0
		wantTie0 bool             // with the tie-break off, every listed score is the same
	}{{
		// 500 MiB on 3 of 10: sum = 500×3/10 = 150 MiB; 100×(150−23)/(1000−23) = 12700/977 = 12.
		name: "worked example 500MiB on 3/10", nodes: 10,
		images: []placement{{"docker.io/library/app:1", 500 * mb, 3}},
		pod:    pod("app:1"),
		want:   map[string]int64{"n00": 12, "n01": 12, "n02": 12},
	}, {
		// Same image everywhere: sum = 500 MiB; 100×477/977 = 47700/977 = 48.
		name: "500MiB on 10/10", nodes: 10,
		images: []placement{{"docker.io/library/app:1", 500 * mb, 10}},
		pod:    pod("app:1"),
		want:   map[string]int64{"n00": 48, "n01": 48, "n02": 48, "n03": 48, "n04": 48, "n05": 48, "n06": 48, "n07": 48, "n08": 48, "n09": 48},
	}, {
		// Two containers, max = 2000 MiB. n00..n04 hold both: 800×10/10 + 300×5/10 = 950 MiB,
		// 100×(950−23)/(2000−23) = 92700/1977 = 46. n05..n09 hold 800 only: 100×777/1977 = 39.
		name: "two containers", nodes: 10,
		images: []placement{{"docker.io/library/big:1", 800 * mb, 10}, {"docker.io/library/mid:1", 300 * mb, 5}},
		pod:    pod("big:1", "mid:1"),
		want: map[string]int64{"n00": 46, "n01": 46, "n02": 46, "n03": 46, "n04": 46,
			"n05": 39, "n06": 39, "n07": 39, "n08": 39, "n09": 39},
	}, {
		// 2000 MiB on 4/4 = 2000 MiB > 1000 MiB × 1: clamped to the maximum, 100.
		name: "clamped above", nodes: 4,
		images: []placement{{"docker.io/library/huge:1", 2000 * mb, 4}},
		pod:    pod("huge:1"),
		want:   map[string]int64{"n00": 100, "n01": 100, "n02": 100, "n03": 100},
	}, {
		// Seed 004: busybox 771 kB on 2 of 3: 771000×2/3 = 514000 B < 23 MiB → 0 in-tree;
		// the tie-break gives the two holders 1.
		name: "seed 004 busybox below the floor, tie-break", nodes: 3,
		images: []placement{{"docker.io/library/busybox:latest", 771000, 2}},
		pod:    pod("busybox"),
		want:   map[string]int64{"n00": 1, "n01": 1},
	}, {
		name: "seed 004 busybox below the floor, in-tree exact", nodes: 3, noTie: true,
		images: []placement{{"docker.io/library/busybox:latest", 771000, 2}},
		pod:    pod("busybox"),
		want:   map[string]int64{},
	}, {
		// Duplicate uses count per container: 600 + 600 = 1200 MiB of max 2000:
		// 100×(1200−23)/1977 = 117700/1977 = 59.
		name: "duplicate image in two containers", nodes: 2,
		images: []placement{{"docker.io/library/dup:1", 600 * mb, 2}},
		pod:    pod("dup:1", "docker.io/library/dup:1"),
		want:   map[string]int64{"n00": 59, "n01": 59},
	}, {
		// Exactly at the floor: 23 MiB on 1/1 → clamp(23) − 23 = 0, sum > 0 → tie-break 1.
		name: "exactly the floor", nodes: 1,
		images: []placement{{"docker.io/library/floor:1", 23 * mb, 1}},
		pod:    pod("floor:1"),
		want:   map[string]int64{"n00": 1},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := ParseArgs(nil)
			if tc.noTie {
				f := false
				args.TieBreakSmallImages = &f
			}
			ns := nodes(tc.nodes)
			tp := newTestPlugin(t, args, ns)
			for i, n := range ns {
				var imgs []img
				for _, p := range tc.images {
					if i < p.on {
						imgs = append(imgs, img{tags: []string{p.tag}, size: p.size})
					}
				}
				if len(imgs) > 0 {
					tp.pl.Index().SetNodeImages(n.Name, nodeImagesObj(n.Name, imgs...))
				}
			}
			got := tp.scores(t, tc.pod)
			for _, n := range ns {
				if got[n.Name] != tc.want[n.Name] {
					t.Errorf("%s: score %d, want %d (all: %v)", n.Name, got[n.Name], tc.want[n.Name], got)
				}
			}
		})
	}
}

// TestInitContainersAndImageVolumes: init containers and image volumes are image uses too
// (v1.37 counts volumes in imageCount). imageCount = 3, max = 3000 MiB.
// n00 holds A (400 MiB on 2/4), B (100 MiB on 4/4), C (1000 MiB on 1/4):
// 200 + 100 + 250 = 550 MiB → 100×(550−23)/(3000−23) = 52700/2977 = 17.
// n01 holds A and B: 200 + 100 = 300 → 27700/2977 = 9. n02, n03 hold B: 100 → 7700/2977 = 2.
func TestInitContainersAndImageVolumes(t *testing.T) {
	ns := nodes(4)
	tp := newTestPlugin(t, nil, ns)
	holds := map[string][]img{
		"n00": {{tags: []string{"docker.io/library/a:1"}, size: 400 * mb}, {tags: []string{"docker.io/library/b:1"}, size: 100 * mb}, {tags: []string{"quay.io/org/c:1"}, size: 1000 * mb}},
		"n01": {{tags: []string{"docker.io/library/a:1"}, size: 400 * mb}, {tags: []string{"docker.io/library/b:1"}, size: 100 * mb}},
		"n02": {{tags: []string{"docker.io/library/b:1"}, size: 100 * mb}},
		"n03": {{tags: []string{"docker.io/library/b:1"}, size: 100 * mb}},
	}
	for n, imgs := range holds {
		tp.pl.Index().SetNodeImages(n, nodeImagesObj(n, imgs...))
	}
	p := pod("b:1")
	p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "a:1"}}
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "quay.io/org/c:1"}}}}
	got := tp.scores(t, p)
	want := map[string]int64{"n00": 17, "n01": 9, "n02": 2, "n03": 2}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: %d, want %d (%v)", n, got[n], w, got)
		}
	}
}

// TestSameAsInTreeWhenNamesMatch compares with the in-tree plugin itself on random clusters
// whose pods spell images exactly as the nodes report them (the case in-tree handles): with
// the tie-break off, every node's score must be identical.
func TestSameAsInTreeWhenNamesMatch(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	images := []struct {
		name string
		size int64
	}{
		{"docker.io/library/nginx:1.16", 60 * mb}, {"docker.io/library/redis:7", 120 * mb},
		{"quay.io/org/ml:2", 3000 * mb}, {"registry.k8s.io/pause:3.10", 300 * 1024},
		{"docker.io/library/postgres:16", 450 * mb}, {"ghcr.io/x/y:v1", 900 * mb},
	}
	f := false
	args, _ := ParseArgs(&Args{TieBreakSmallImages: &f})
	for round := 0; round < 30; round++ {
		n := 1 + rng.Intn(12)
		ns := make([]*v1.Node, n)
		for i := range ns {
			var cis []v1.ContainerImage
			for _, im := range images {
				if rng.Intn(2) == 0 {
					cis = append(cis, v1.ContainerImage{Names: []string{im.name}, SizeBytes: im.size})
				}
			}
			ns[i] = node(fmt.Sprintf("r%d-n%d", round, i), cis...)
		}
		tp := newTestPlugin(t, args, ns)
		var refs []string
		for c := 0; c < 1+rng.Intn(4); c++ {
			refs = append(refs, images[rng.Intn(len(images))].name)
		}
		p := pod(refs...)
		if rng.Intn(2) == 0 {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Image: images[rng.Intn(len(images))].name}}
		}
		got := tp.scores(t, p)
		ref, err := intree.New(context.Background(), nil, tp.h)
		if err != nil {
			t.Fatal(err)
		}
		all, _ := tp.h.Snapshot.NodeInfos().List()
		for _, ni := range all {
			want, st := ref.(fwk.ScorePlugin).Score(context.Background(), framework.NewCycleState(), p, ni)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			if got[ni.Node().Name] != want {
				t.Fatalf("round %d node %s pod %v: NodeImageLocality %d, in-tree %d", round, ni.Node().Name, refs, got[ni.Node().Name], want)
			}
		}
	}
}

// TestNormalisedMatching: the runtime's fully-qualified names match every short spelling a pod
// may use (the in-tree plugin scores 0 here: kubernetes#112699), and only those.
func TestNormalisedMatching(t *testing.T) {
	ns := nodes(2)
	// n00 reports through NodeImages, n01 through node.status.images, both fully qualified.
	ns[1].Status.Images = []v1.ContainerImage{{Names: []string{"docker.io/library/nginx@" + dgA, "docker.io/library/nginx:1.16"}, SizeBytes: 500 * mb}}
	tp := newTestPlugin(t, nil, ns)
	tp.pl.Index().SetNodeImages("n00", nodeImagesObj("n00", img{tags: []string{"docker.io/library/nginx:1.16"}, digests: []string{"docker.io/library/nginx@" + dgA}, size: 500 * mb}))
	// 500 MiB on 2/2: 100×477/977 = 48.
	cases := []struct {
		ref  string
		want int64
	}{
		{"nginx:1.16", 48}, {"library/nginx:1.16", 48}, {"docker.io/nginx:1.16", 48},
		{"docker.io/library/nginx:1.16", 48}, {"index.docker.io/library/nginx:1.16", 48},
		{"nginx:1.17", 0}, {"nginx", 0}, {"quay.io/nginx:1.16", 0}, {"mirror.local/library/nginx:1.16", 0},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			got := tp.scores(t, pod(tc.ref))
			if got["n00"] != tc.want || got["n01"] != tc.want {
				t.Errorf("scores %v, want %d on both", got, tc.want)
			}
		})
	}
	// The in-tree plugin on the same node status: the short name never matches.
	ref, _ := intree.New(context.Background(), nil, tp.h)
	ni, _ := tp.h.Snapshot.NodeInfos().Get("n01")
	if s, _ := ref.(fwk.ScorePlugin).Score(context.Background(), framework.NewCycleState(), pod("nginx:1.16"), ni); s != 0 {
		t.Errorf("in-tree scored %d for a short name; the premise of this plugin changed", s)
	}
}

// TestDigestPins: a pinned reference matches by digest only — a moved tag does not count,
// a digest present under any tag does.
func TestDigestPins(t *testing.T) {
	ns := nodes(1)
	tp := newTestPlugin(t, nil, ns)
	tp.pl.Index().SetNodeImages("n00", nodeImagesObj("n00", img{
		tags: []string{"docker.io/library/nginx:1.16"}, digests: []string{"docker.io/library/nginx@" + dgA}, size: 1000 * mb,
		id: "sha256:" + strings.Repeat("e", 64)}))
	cases := []struct {
		ref  string
		want int64
	}{
		{"nginx@" + dgA, 100},
		{"docker.io/library/nginx@" + dgA, 100},
		{"nginx:1.16@" + dgA, 100},
		{"nginx:whatever@" + dgA, 100}, // the digest decides, not the tag
		{"nginx@" + dgB, 0},
		{"nginx:1.16@" + dgB, 0}, // tag present, but the pinned content is not
		{"redis@" + dgA, 0},      // same digest under another repository is another reference
		{"sha256:" + strings.Repeat("e", 64), 100},
		{strings.Repeat("e", 64), 100},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			if got := tp.scores(t, pod(tc.ref))["n00"]; got != tc.want {
				t.Errorf("score %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSpreadFactor: the more nodes hold an image, the more each holder scores (node heating
// damping), and the snapshot's node count is the denominator — an inventory for a node the
// snapshot does not have counts for nothing.
func TestSpreadFactor(t *testing.T) {
	const size = 1000 * mb
	var last int64 = -1
	for k := 1; k <= 8; k++ {
		ns := nodes(8)
		tp := newTestPlugin(t, nil, ns)
		for i := 0; i < k; i++ {
			n := ns[i].Name
			tp.pl.Index().SetNodeImages(n, nodeImagesObj(n, img{tags: []string{"docker.io/library/x:1"}, size: size}))
		}
		// A ghost node (deleted, NodeImages left behind) must not raise NumNodes.
		tp.pl.Index().SetNodeImages("ghost", nodeImagesObj("ghost", img{tags: []string{"docker.io/library/x:1"}, size: size}))
		got := tp.scores(t, pod("x:1"))
		// sum = 1000 MiB × k/8; score = 100 × (1000k/8 − 23) / 977.
		want := int64(100 * (int64(float64(size)*float64(k)/8) - 23*mb) / (977 * mb))
		if got["n00"] != want {
			t.Errorf("k=%d: holder score %d, want %d", k, got["n00"], want)
		}
		if k < 8 && got["n07"] != 0 {
			t.Errorf("k=%d: non-holder scored %d", k, got["n07"])
		}
		if got["n00"] <= last {
			t.Errorf("k=%d: score %d not above %d at k-1", k, got["n00"], last)
		}
		last = got["n00"]
	}
}

// TestNodeImagesOverNodeStatus: NodeImages wins where a node has one (also when Stale),
// node.status.images serves the others, and useNodeStatus=false ignores it.
func TestNodeImagesOverNodeStatus(t *testing.T) {
	status := []v1.ContainerImage{{Names: []string{"docker.io/library/app:1"}, SizeBytes: 1000 * mb}}
	for _, useStatus := range []bool{true, false} {
		t.Run(fmt.Sprintf("useNodeStatus=%v", useStatus), func(t *testing.T) {
			ns := nodes(2)
			ns[0].Status.Images = status
			ns[1].Status.Images = status
			u := useStatus
			args, _ := ParseArgs(&Args{UseNodeStatus: &u})
			tp := newTestPlugin(t, args, ns)
			// n00's inventory (Stale: the agent lost the runtime) does not list app:1.
			obj := nodeImagesObj("n00", img{tags: []string{"docker.io/library/other:1"}, size: mb})
			obj["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Stale", "status": "True"}}}
			tp.pl.Index().SetNodeImages("n00", obj)
			got := tp.scores(t, pod("app:1"))
			// status only on n01: 1000 MiB × 1/2 = 500 → 48.
			want := map[string]int64{"n00": 0, "n01": 48}
			if !useStatus {
				want["n01"] = 0
			}
			if got["n00"] != want["n00"] || got["n01"] != want["n01"] {
				t.Errorf("got %v, want %v", got, want)
			}
			// Deleting the NodeImages hands n00 back to its status (when allowed):
			// both hold it, 1000 MiB × 2/2 → 100.
			tp.pl.Index().DeleteNodeImages("n00")
			got = tp.scores(t, pod("app:1"))
			if useStatus && (got["n00"] != 100 || got["n01"] != 100) {
				t.Errorf("after delete: %v, want 100 on both", got)
			}
			if !useStatus && (got["n00"] != 0 || got["n01"] != 0) {
				t.Errorf("after delete without node status: %v, want 0", got)
			}
		})
	}
}

// TestAssumedPulls: a pod placed on a node makes its images count there for the window
// (Reserve path and informer path), Unreserve undoes it, and it lapses exactly at the end.
func TestAssumedPulls(t *testing.T) {
	const size = 900 * mb
	setup := func(t *testing.T) *testPlugin {
		ns := nodes(3)
		tp := newTestPlugin(t, nil, ns)
		tp.pl.Index().SetNodeImages("n00", nodeImagesObj("n00", img{tags: []string{"docker.io/library/ml:1"}, size: size}))
		return tp
	}
	// Before: only n00 holds it: 900/3 = 300 MiB → 100×277/977 = 28.
	// After a pull on n01: 900×2/3 = 600 on n00 and (largest known size) on n01 → 100×577/977 = 59.
	t.Run("reserve then expire", func(t *testing.T) {
		tp := setup(t)
		if got := tp.scores(t, pod("ml:1")); got["n00"] != 28 || got["n01"] != 0 {
			t.Fatalf("before: %v", got)
		}
		tp.reserve(t, pod("ml:1"), "n01")
		for _, at := range []time.Duration{0, 4*time.Minute + 59*time.Second} {
			tp.clock.t = t0.Add(at)
			if got := tp.scores(t, pod("ml:1")); got["n00"] != 59 || got["n01"] != 59 || got["n02"] != 0 {
				t.Fatalf("at +%s: %v, want n00=n01=59", at, got)
			}
		}
		tp.clock.t = t0.Add(5 * time.Minute)
		if got := tp.scores(t, pod("ml:1")); got["n00"] != 28 || got["n01"] != 0 {
			t.Fatalf("at the window's end: %v, want the pull gone", got)
		}
	})
	t.Run("unreserve", func(t *testing.T) {
		tp := setup(t)
		p := pod("ml:1")
		tp.reserve(t, p, "n01")
		tp.pl.Unreserve(context.Background(), framework.NewCycleState(), p, "n02") // not where it is: no-op
		if got := tp.scores(t, pod("ml:1")); got["n01"] != 59 {
			t.Fatalf("unreserve elsewhere dropped the pull: %v", got)
		}
		tp.pl.Unreserve(context.Background(), framework.NewCycleState(), p, "n01")
		if got := tp.scores(t, pod("ml:1")); got["n01"] != 0 || got["n00"] != 28 {
			t.Fatalf("after unreserve: %v", got)
		}
	})
	t.Run("informer: recent binding counts, old one does not", func(t *testing.T) {
		tp := setup(t)
		recent := pod("ml:1")
		recent.Spec.NodeName = "n01"
		recent.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
		recent.Status.Conditions[0].LastTransitionTime.Time = t0.Add(-time.Minute)
		old := pod("ml:1")
		old.Spec.NodeName = "n02"
		old.CreationTimestamp.Time = t0.Add(-6 * time.Minute) // created with nodeName, no condition
		onPod(tp.pl.Index(), recent)
		onPod(tp.pl.Index(), old)
		if got := tp.scores(t, pod("ml:1")); got["n01"] != 59 || got["n02"] != 0 {
			t.Fatalf("got %v, want n01=59 (bound a minute ago), n02=0 (six minutes ago)", got)
		}
		// Bound a minute before t0: lapses at t0+4m, not at t0+5m.
		tp.clock.t = t0.Add(4 * time.Minute)
		if got := tp.scores(t, pod("ml:1")); got["n01"] != 0 {
			t.Fatalf("at +4m: %v, want the pull gone", got)
		}
	})
	t.Run("window 0 turns it off", func(t *testing.T) {
		args, _ := ParseArgs(&Args{AssumePulledFor: durationPtr(0)})
		ns := nodes(3)
		tp := newTestPlugin(t, args, ns)
		tp.pl.Index().SetNodeImages("n00", nodeImagesObj("n00", img{tags: []string{"docker.io/library/ml:1"}, size: size}))
		tp.reserve(t, pod("ml:1"), "n01")
		if got := tp.scores(t, pod("ml:1")); got["n01"] != 0 {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("unknown size: a pull of an image no inventory lists scores nothing", func(t *testing.T) {
		tp := setup(t)
		tp.reserve(t, pod("never-seen:1"), "n01")
		got := tp.scores(t, pod("never-seen:1"))
		if got["n01"] != 0 {
			t.Fatalf("got %v", got)
		}
	})
}

// TestBadInventory: hand-edited garbage is skipped entry by entry and counted; what is
// readable still scores; nothing panics.
func TestBadInventory(t *testing.T) {
	ns := nodes(1)
	tp := newTestPlugin(t, nil, ns)
	before, _ := testutil.GetCounterMetricValue(invalidRefs.WithLabelValues(sourceNodeImages))
	obj := nodeImagesObj("n00")
	obj["spec"].(map[string]any)["images"] = []any{
		"not-an-object",
		map[string]any{"id": "x", "tags": []any{"Nginx:UPPER", 42, "", "nginx:"}, "sizeBytes": int64(5)},         // 4 bad names
		map[string]any{"id": "y", "digests": []any{"nginx@sha256:abc"}, "sizeBytes": "big"},                      // bad digest, bad size
		map[string]any{"id": "z", "tags": "docker.io/library/nginx:1.16", "sizeBytes": int64(1)},                 // tags not a list
		map[string]any{"id": "w", "tags": []any{"docker.io/library/ok:1"}, "sizeBytes": int64(-5)},               // negative size → 0
		map[string]any{"id": "v", "tags": []any{"docker.io/library/huge:1"}, "sizeBytes": float64(9e18)},         // clamped to 1 TiB
		map[string]any{"id": "u", "tags": []any{"docker.io/library/good:1", "Bad Name"}, "sizeBytes": 1000 * mb}, // one good, one bad
	}
	tp.pl.Index().SetNodeImages("n00", obj)
	after, _ := testutil.GetCounterMetricValue(invalidRefs.WithLabelValues(sourceNodeImages))
	// 1 (string item) + 4 (names) + 2 (digest, size) + 1 (tags type) + 1 (negative) + 1 (huge) + 1 (Bad Name) = 11
	if d := after - before; d != 11 {
		t.Errorf("invalid entries counted %v, want 11", d)
	}
	got := tp.scores(t, pod("good:1"))
	if got["n00"] != 100 {
		t.Errorf("good image next to garbage: %v, want 100", got)
	}
	if got := tp.scores(t, pod("huge:1")); got["n00"] != 100 {
		t.Errorf("clamped size: %v, want 100", got)
	}
	if got := tp.scores(t, pod("ok:1")); got["n00"] != 0 {
		t.Errorf("negative size read as 0: %v, want 0", got)
	}
	// A spec that is not an object at all, and a pod with unparseable references.
	tp.pl.Index().SetNodeImages("n00", map[string]any{"spec": "garbage"})
	pb, _ := testutil.GetCounterMetricValue(invalidRefs.WithLabelValues(sourcePod))
	if got := tp.scores(t, pod("docker.io/UPPER/case:1", "good:1")); got["n00"] != 0 {
		t.Errorf("after garbage spec: %v", got)
	}
	pa, _ := testutil.GetCounterMetricValue(invalidRefs.WithLabelValues(sourcePod))
	if pa-pb != 1 {
		t.Errorf("pod invalid refs counted %v, want 1", pa-pb)
	}
}

// TestTenThousandImages: an inventory far past the CRD's cap still indexes and scores.
func TestTenThousandImages(t *testing.T) {
	ns := nodes(2)
	tp := newTestPlugin(t, nil, ns)
	var imgs []img
	for i := 0; i < 10000; i++ {
		imgs = append(imgs, img{tags: []string{fmt.Sprintf("registry.local/team/app-%d:v%d", i, i%7)},
			digests: []string{fmt.Sprintf("registry.local/team/app-%d@sha256:%064x", i, i)}, size: int64(i+1) * mb})
	}
	tp.pl.Index().SetNodeImages("n00", nodeImagesObj("n00", imgs...))
	// app-9999 is 10000 MiB on 1/2 → 5000 MiB ≥ 1000 → 100; app-99 is 100 MiB on 1/2 → 50 → 100×27/977 = 2.
	if got := tp.scores(t, pod("registry.local/team/app-9999:v3")); got["n00"] != 100 || got["n01"] != 0 {
		t.Errorf("app-9999: %v", got)
	}
	if got := tp.scores(t, pod(fmt.Sprintf("registry.local/team/app-99@sha256:%064x", 99))); got["n00"] != 2 {
		t.Errorf("app-99 by digest: %v", got)
	}
}

// TestSignPod: pods with the same images in any spelling share a signature; a different
// image, a second use or a bad reference changes it.
func TestSignPod(t *testing.T) {
	tp := newTestPlugin(t, nil, nodes(1))
	sig := func(p *v1.Pod) string {
		f, st := tp.pl.SignPod(context.Background(), p)
		if !st.IsSuccess() || len(f) != 1 || f[0].Key != SignerName {
			t.Fatalf("SignPod: %v %v", f, st)
		}
		return fmt.Sprint(f[0].Value)
	}
	base := sig(pod("nginx:1.16", "redis"))
	if s := sig(pod("docker.io/library/redis:latest", "docker.io/library/nginx:1.16")); s != base {
		t.Errorf("same images differently spelled: %s vs %s", s, base)
	}
	for _, p := range []*v1.Pod{pod("nginx:1.17", "redis"), pod("nginx:1.16", "redis", "redis"), pod("nginx:1.16", "redis", "BAD")} {
		if s := sig(p); s == base {
			t.Errorf("%v signs like %v", s, base)
		}
	}
}

func durationPtr(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
