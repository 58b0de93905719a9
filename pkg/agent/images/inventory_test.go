package images

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func TestBuild(t *testing.T) {
	cases := []struct {
		name      string
		raw       []*runtimeapi.Image
		want      []berthv1alpha1.NodeImage
		wantTotal int64
		wantStats BuildStats
	}{
		{
			name: "containerd's own fully-qualified names are kept as they are",
			raw: []*runtimeapi.Image{img("sha256:b", 771, []string{"docker.io/library/busybox:latest"},
				[]string{"docker.io/library/busybox@" + d1})},
			want:      []berthv1alpha1.NodeImage{{ID: "sha256:b", Tags: []string{"docker.io/library/busybox:latest"}, Digests: []string{"docker.io/library/busybox@" + d1}, SizeBytes: 771}},
			wantTotal: 771,
		},
		{
			// why: runtimes that record short names (docker-era, some CRI-O setups) must give
			// the same keys as containerd, or the plugin misses them.
			name: "short and library names are normalised, images sorted by id",
			raw: []*runtimeapi.Image{
				img("sha256:z", 5, []string{"nginx:1.16", "library/nginx:1.16", "docker.io/nginx:1.16"}, []string{"nginx@" + d2}),
				img("sha256:a", 7, []string{"registry.local:5000/team/app"}, nil),
			},
			want: []berthv1alpha1.NodeImage{
				{ID: "sha256:a", Tags: []string{"registry.local:5000/team/app:latest"}, SizeBytes: 7},
				{ID: "sha256:z", Tags: []string{"docker.io/library/nginx:1.16"}, Digests: []string{"docker.io/library/nginx@" + d2}, SizeBytes: 5},
			},
			wantTotal: 12,
		},
		{
			name: "placeholders, invalid and cross-form names are dropped; untagged images kept",
			raw:  []*runtimeapi.Image{img("sha256:c", 0, []string{"<none>:<none>", "Upper/Case:1", "ok:1", "x@" + d1}, []string{"<none>@<none>", "bad@sha256:12"})},
			want: []berthv1alpha1.NodeImage{{ID: "sha256:c", Tags: []string{"docker.io/library/ok:1"}}},
			// Upper/Case, x@digest as a tag, bad digest
			wantStats: BuildStats{InvalidRefs: 3},
		},
		{
			// why: one tag, two images (a retag between listings): the lowest id keeps it in
			// every listing, so the object does not flap.
			name: "a name on two images goes to the lowest id",
			raw: []*runtimeapi.Image{
				img("sha256:f", 2, []string{"docker.io/library/app:v1"}, []string{"app@" + d1}),
				img("sha256:e", 1, []string{"app:v1", "app:v2"}, []string{"docker.io/library/app@" + d1}),
			},
			want: []berthv1alpha1.NodeImage{
				{ID: "sha256:e", Tags: []string{"docker.io/library/app:v1", "docker.io/library/app:v2"}, Digests: []string{"docker.io/library/app@" + d1}, SizeBytes: 1},
				{ID: "sha256:f", SizeBytes: 2},
			},
			wantTotal: 3,
			wantStats: BuildStats{DuplicateRefs: 2},
		},
		{
			name: "repeated ids are merged; pinned and the larger size win",
			raw: []*runtimeapi.Image{
				img("sha256:p", 3, []string{"registry.k8s.io/pause:3.10.1"}, nil),
				{Id: "sha256:p", Size: 9, Pinned: true, RepoTags: []string{"registry.k8s.io/pause:latest"}},
			},
			want:      []berthv1alpha1.NodeImage{{ID: "sha256:p", Tags: []string{"registry.k8s.io/pause:3.10.1", "registry.k8s.io/pause:latest"}, SizeBytes: 9, Pinned: true}},
			wantTotal: 9,
			wantStats: BuildStats{DuplicateIDs: 1},
		},
		{
			name:      "a size past int64 is clamped, not wrapped negative",
			raw:       []*runtimeapi.Image{img("sha256:h", math.MaxUint64, nil, nil), img("sha256:i", 5, nil, nil)},
			want:      []berthv1alpha1.NodeImage{{ID: "sha256:h", SizeBytes: math.MaxInt64}, {ID: "sha256:i", SizeBytes: 5}},
			wantTotal: math.MaxInt64,
		},
		{
			name: "empty ids and nil entries are skipped",
			raw:  []*runtimeapi.Image{nil, img("", 1, []string{"nginx"}, nil)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv := Build(tc.raw)
			if !reflect.DeepEqual(inv.Images, tc.want) {
				t.Fatalf("images\n got %+v\nwant %+v", inv.Images, tc.want)
			}
			if inv.TotalSizeBytes != tc.wantTotal || inv.Stats != tc.wantStats {
				t.Fatalf("total %d stats %+v, want %d %+v", inv.TotalSizeBytes, inv.Stats, tc.wantTotal, tc.wantStats)
			}
		})
	}
}

func TestBuildTruncatesNames(t *testing.T) {
	var tags []string
	for i := range berthv1alpha1.NodeImagesMaxNames + 3 {
		tags = append(tags, fmt.Sprintf("app:v%03d", i))
	}
	inv := Build([]*runtimeapi.Image{img("sha256:t", 1, tags, nil)})
	if n := len(inv.Images[0].Tags); n != berthv1alpha1.NodeImagesMaxNames || inv.Stats.TruncatedRefs != 3 {
		t.Fatalf("%d tags kept, %d truncated; want %d and 3", n, inv.Stats.TruncatedRefs, berthv1alpha1.NodeImagesMaxNames)
	}
	if inv.Images[0].Tags[0] != "docker.io/library/app:v000" {
		t.Fatalf("kept %v first; want the sorted prefix", inv.Images[0].Tags[0])
	}
}

func TestHash(t *testing.T) {
	base := []*runtimeapi.Image{
		img("sha256:a", 1, []string{"nginx:1", "nginx:2"}, []string{"nginx@" + d1}),
		img("sha256:b", 2, []string{"redis"}, nil),
	}
	h := Hash(Build(base).Images)
	same := []*runtimeapi.Image{
		// why: runtimes list in no particular order; reordering must not cause a write.
		img("sha256:b", 2, []string{"docker.io/library/redis:latest"}, nil),
		img("sha256:a", 1, []string{"docker.io/library/nginx:2", "nginx:1"}, []string{"docker.io/library/nginx@" + d1}),
	}
	if got := Hash(Build(same).Images); got != h {
		t.Errorf("reordered and respelled listing hashes differently")
	}
	changes := map[string][]*runtimeapi.Image{
		"image removed": base[:1],
		"tag added":     {img("sha256:a", 1, []string{"nginx:1", "nginx:2", "nginx:3"}, []string{"nginx@" + d1}), base[1]},
		"size changed":  {img("sha256:a", 9, []string{"nginx:1", "nginx:2"}, []string{"nginx@" + d1}), base[1]},
		"pinned":        {{Id: "sha256:a", Size: 1, Pinned: true, RepoTags: []string{"nginx:1", "nginx:2"}, RepoDigests: []string{"nginx@" + d1}}, base[1]},
		"digest moved":  {img("sha256:a", 1, []string{"nginx:1", "nginx:2"}, []string{"nginx@" + d2}), base[1]},
	}
	for name, raw := range changes {
		if Hash(Build(raw).Images) == h {
			t.Errorf("%s: same hash, the change would not be published", name)
		}
	}
}

// BenchmarkBuildHash5000 is one re-list of a node at the image limit: normalise 5000 images
// (two tags and a digest each) and hash the result, the work done every --image-interval.
func BenchmarkBuildHash5000(b *testing.B) {
	raw := make([]*runtimeapi.Image, 0, berthv1alpha1.NodeImagesMaxImages)
	for i := range berthv1alpha1.NodeImagesMaxImages {
		raw = append(raw, img(fmt.Sprintf("sha256:%064x", i), uint64(1000+i),
			[]string{fmt.Sprintf("registry.local:5000/team/app%d:v1", i), fmt.Sprintf("app%d:latest", i)},
			[]string{fmt.Sprintf("registry.local:5000/team/app%d@sha256:%064x", i, i)}))
	}
	b.ReportAllocs()
	for b.Loop() {
		inv := Build(raw)
		_ = Hash(inv.Images)
	}
	b.ReportMetric(float64(SpecBytes("node", Build(raw).Images)), "spec-bytes")
	b.ReportMetric(float64(StoredBytes("node", Build(raw).Images)), "stored-bytes")
}
