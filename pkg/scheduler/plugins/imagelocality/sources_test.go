package imagelocality

import (
	"context"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/plugintest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
)

// TestInformers drives the plugin through its real event sources on fake API clients: a
// NodeImages object (created, edited, deleted), a node's status images and a bound pod.
func TestInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n0 := node("n00")
	n1 := node("n01", v1.ContainerImage{Names: []string{"docker.io/library/web:2"}, SizeBytes: 400 * mb})
	n2 := node("n02")
	bound := pod("web:2")
	bound.Spec.NodeName = "n02"
	bound.CreationTimestamp = metav1.Now()
	cs := fake.NewClientset(n0, n1, n2, bound)
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: GVR.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: "nodeimages", Kind: "NodeImages"}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: "NodeImagesList"})
	// why Create, not the constructor: the fake guesses the resource from the kind
	// ("nodeimageses") and would file a seeded object where no one lists it.
	if _, err := dyn.Resource(GVR).Create(ctx, &unstructured.Unstructured{Object: nodeImagesObj("n00", img{tags: []string{"docker.io/library/web:2"}, size: 400 * mb})}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	h := &plugintest.Handle{Snapshot: cache.NewSnapshot(nil, []*v1.Node{n0, n1, n2}), Factory: factory}
	args, _ := ParseArgs(nil)
	pl, err := newWithClients(ctx, args, h, dyn, cs.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	tp := &testPlugin{pl: pl, h: h}

	waitScores := func(what string, want map[string]int64) {
		t.Helper()
		var got map[string]int64
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			got = tp.scores(t, pod("web:2"))
			for n, w := range want {
				if got[n] != w {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: scores %v, want %v (holders %v pulling %v)", what, got, want, tp.pl.index.holders, tp.pl.index.pulling)
		}
	}
	// n00 by NodeImages, n01 by status, n02 by the bound pod's pull: 400 MiB × 3/3 → 100×377/977 = 38.
	waitScores("all three sources", map[string]int64{"n00": 38, "n01": 38, "n02": 38})

	// The agent reports the image gone from n00: 400 × 2/3 = 266.67 MiB → 100×243/977 = 24.
	obj := &unstructured.Unstructured{Object: nodeImagesObj("n00", img{tags: []string{"docker.io/library/other:1"}, size: mb})}
	obj.SetResourceVersion("2")
	if _, err := dyn.Resource(GVR).Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitScores("n00 lost it", map[string]int64{"n00": 0, "n01": 24, "n02": 24})

	// The pod is deleted: its assumed pull goes; 400 × 1/3 → 100×110/977 = 11.
	if err := cs.CoreV1().Pods(bound.Namespace).Delete(ctx, bound.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitScores("pod gone", map[string]int64{"n00": 0, "n01": 11, "n02": 0})

	// NodeImages on n01 replaces its status list, even though it does not list the image.
	if _, err := dyn.Resource(GVR).Create(ctx, &unstructured.Unstructured{Object: nodeImagesObj("n01", img{tags: []string{"docker.io/library/other:1"}, size: mb})}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitScores("n01 inventory wins over its status", map[string]int64{"n00": 0, "n01": 0, "n02": 0})
	if err := dyn.Resource(GVR).Delete(ctx, "n01", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitScores("n01 inventory deleted: status again", map[string]int64{"n01": 11})
}

// TestNoNodeImagesAPI: without the CRD the plugin starts and scores from node status.
func TestNoNodeImagesAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n0 := node("n00", v1.ContainerImage{Names: []string{"docker.io/library/web:2"}, SizeBytes: 2000 * mb})
	cs := fake.NewClientset(n0)
	factory := informers.NewSharedInformerFactory(cs, 0)
	h := &plugintest.Handle{Snapshot: cache.NewSnapshot(nil, []*v1.Node{n0}), Factory: factory}
	args, _ := ParseArgs(nil)
	pl, err := newWithClients(ctx, args, h, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), cs.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// why poll: handlers run after the informer reports synced.
	var got map[string]int64
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		got = (&testPlugin{pl: pl, h: h}).scores(t, pod("web:2"))
		return got["n00"] == 100, nil
	})
	if err != nil {
		t.Fatalf("got %v, want 100 from node status", got)
	}
}
