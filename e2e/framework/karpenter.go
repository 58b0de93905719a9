package framework

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
)

// StartKarpenter runs Karpenter in c (cluster.StartKarpenter) and creates the NodePools; c.Stop
// (the test's cleanup) deletes everything Karpenter made before ending it.
func StartKarpenter(ctx context.Context, t testing.TB, c *cluster.Cluster, pools ...cluster.NodePoolSpec) dynamic.Interface {
	t.Helper()
	if _, err := c.StartKarpenter(ctx, cluster.KarpenterOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		if _, err := dyn.Resource(cluster.NodePoolGVR).Create(ctx, cluster.NodePoolObject(p), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating NodePool %s: %v", p.Name, err)
		}
	}
	return dyn
}
