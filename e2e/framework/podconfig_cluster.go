package framework

import (
	"context"
	"testing"

	"github.com/berth-sched/berth/e2e/cluster"
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
