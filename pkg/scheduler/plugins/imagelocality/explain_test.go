package imagelocality

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestExplain: seed 004 as the demo shows it — busybox in the NodeImages of two of three
// nodes, node.status.images empty (kind): NodeImageLocality 1/1/0 (tie-break under the floor),
// the in-tree plugin 0 everywhere; and a large image listed in node status under its
// fully-qualified name: the in-tree plugin still scores 0 for the pod's short name.
func TestExplain(t *testing.T) {
	ns := nodes(3)
	objs := []map[string]any{
		nodeImagesObj("n01", img{tags: []string{"docker.io/library/busybox:latest"}, size: 771000}),
		nodeImagesObj("n02", img{tags: []string{"docker.io/library/busybox:latest"}, size: 771000}),
	}
	e, err := Explain(context.Background(), nil, ns, objs, nil, pod("busybox"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"n00": 0, "n01": 1, "n02": 1}
	for n, w := range want {
		if e.NodeImageLocality[n] != w || e.InTree[n] != 0 {
			t.Errorf("%s: NodeImageLocality %d (want %d), in-tree %d (want 0)", n, e.NodeImageLocality[n], w, e.InTree[n])
		}
	}

	ns = nodes(2)
	ns[0].Status.Images = []v1.ContainerImage{{Names: []string{"docker.io/library/nginx:1.16"}, SizeBytes: 1000 * mb}}
	// A pod bound a moment ago to n01 counts as pulling nginx there (informer path).
	b := pod("nginx:1.16")
	b.Spec.NodeName = "n01"
	b.CreationTimestamp = metav1.Now()
	e, err = Explain(context.Background(), nil, ns, nil, []*v1.Pod{b}, pod("nginx:1.16"))
	if err != nil {
		t.Fatal(err)
	}
	// 1000 MiB on 2/2 (status + pull) → 100 on both; in-tree: short name, no match.
	if e.NodeImageLocality["n00"] != 100 || e.NodeImageLocality["n01"] != 100 || e.InTree["n00"] != 0 {
		t.Errorf("got %+v", e)
	}
	e, err = Explain(context.Background(), nil, ns, nil, nil, pod("docker.io/library/nginx:1.16"))
	if err != nil {
		t.Fatal(err)
	}
	// The in-tree plugin matches the exact name: 1000 MiB on 1/2 → 500 → 48, like ours.
	if e.InTree["n00"] != 48 || e.NodeImageLocality["n00"] != 48 {
		t.Errorf("exact name: %+v", e)
	}
}
