package imagelocality

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/plugintest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

const mb = mib

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// img is one image of a NodeImages object.
type img struct {
	id      string
	tags    []string
	digests []string
	size    int64
}

// nodeImagesObj renders a NodeImages object's unstructured content, as the API server returns it.
func nodeImagesObj(node string, imgs ...img) map[string]any {
	var list []any
	for _, i := range imgs {
		m := map[string]any{"id": i.id, "sizeBytes": i.size}
		if i.id == "" {
			m["id"] = fmt.Sprintf("sha256:%064x", len(list)+1)
		}
		if len(i.tags) > 0 {
			var ts []any
			for _, t := range i.tags {
				ts = append(ts, t)
			}
			m["tags"] = ts
		}
		if len(i.digests) > 0 {
			var ds []any
			for _, d := range i.digests {
				ds = append(ds, d)
			}
			m["digests"] = ds
		}
		list = append(list, m)
	}
	return map[string]any{
		"apiVersion": "berth.dev/v1alpha1", "kind": "NodeImages",
		"metadata": map[string]any{"name": node},
		"spec":     map[string]any{"nodeName": node, "images": list},
	}
}

func node(name string, images ...v1.ContainerImage) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Images: images}}
}

func nodes(n int) []*v1.Node {
	out := make([]*v1.Node, n)
	for i := range out {
		out[i] = node(fmt.Sprintf("n%02d", i))
	}
	return out
}

var podSeq int

func pod(images ...string) *v1.Pod {
	podSeq++
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", podSeq), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", podSeq))}}
	for i, im := range images {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprintf("c%d", i), Image: im})
	}
	return p
}

// testPlugin is the plugin on a static snapshot with an index the test feeds.
type testPlugin struct {
	pl    *NodeImageLocality
	clock *clock
	h     *plugintest.Handle
}

func newTestPlugin(t testing.TB, args *Args, ns []*v1.Node) *testPlugin {
	t.Helper()
	if args == nil {
		var err error
		if args, err = ParseArgs(nil); err != nil {
			t.Fatal(err)
		}
	}
	c := &clock{t: t0}
	h := &plugintest.Handle{Snapshot: cache.NewSnapshot(nil, ns)}
	ix := NewIndex(args.AssumePulledFor.Duration, *args.UseNodeStatus, c.now)
	for _, n := range ns {
		if len(n.Status.Images) > 0 {
			onNodeStatus(ix, n)
		}
	}
	return &testPlugin{pl: NewFromIndex(context.Background(), args, h, ix), clock: c, h: h}
}

// scores runs PreScore then Score on every node, as the framework does, and returns node → score.
func (tp *testPlugin) scores(t testing.TB, p *v1.Pod) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	all, err := tp.h.Snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	st := tp.pl.PreScore(ctx, cs, p, all)
	if st.IsSkip() {
		for _, ni := range all {
			out[ni.Node().Name] = 0
		}
		return out
	}
	if !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	for _, ni := range all {
		s, st := tp.pl.Score(ctx, cs, p, ni)
		if !st.IsSuccess() {
			t.Fatalf("Score(%s): %v", ni.Node().Name, st)
		}
		out[ni.Node().Name] = s
	}
	return out
}

// reserve runs PreScore and Reserve for p on nodeName, as a scheduling cycle that picks it.
func (tp *testPlugin) reserve(t testing.TB, p *v1.Pod, nodeName string) {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	all, _ := tp.h.Snapshot.NodeInfos().List()
	if st := tp.pl.PreScore(ctx, cs, p, all); !st.IsSuccess() && !st.IsSkip() {
		t.Fatal(st)
	}
	if st := tp.pl.Reserve(ctx, cs, p, nodeName); !st.IsSuccess() {
		t.Fatal(st)
	}
}
