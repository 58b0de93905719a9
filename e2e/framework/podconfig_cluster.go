package framework

import (
	"context"
	"testing"
	"time"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StartPodConfigCluster starts the local cluster with only its real node (named nodeName, the
// netecho image loaded) and the PodConfig CRDs installed: the setup of every suite that makes
// PodConfig links on the real node. The cluster stops when the test ends.
func StartPodConfigCluster(ctx context.Context, t *testing.T, nodeName string) *cluster.Cluster {
	t.Helper()
	img, err := NetechoImage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Config{
		RealNode:    &cluster.RealNodeConfig{NodeName: nodeName, Images: []string{img}},
		WithoutKWOK: true, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if err := InstallPodConfigCRDs(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	return c
}

// WaitPodConfig polls PodConfig ns/name until ok holds, and returns it; what says what is
// awaited in the failure, with the last status seen.
func WaitPodConfig(ctx context.Context, t *testing.T, cl client.Reader, ns, name, what string, timeout time.Duration, ok func(*berthv1alpha1.PodConfig) bool) *berthv1alpha1.PodConfig {
	t.Helper()
	pc := &berthv1alpha1.PodConfig{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pc); err != nil {
			return false, nil
		}
		return ok(pc), nil
	})
	if err != nil {
		t.Fatalf("PodConfig %s/%s: %s: %v; last status %+v", ns, name, what, err, pc.Status)
	}
	return pc
}
