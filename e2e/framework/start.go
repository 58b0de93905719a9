package framework

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/pkg/operator"
)

// StartCluster starts a local cluster for one test and stops it when the test ends; a cluster
// that does not start fails the test.
func StartCluster(ctx context.Context, t testing.TB, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// OperatorClient is a controller-runtime client of c with the operator's scheme (its own
// kinds and the built-in ones it manages).
func OperatorClient(t testing.TB, c *cluster.Cluster) client.Client {
	t.Helper()
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	return newClient(t, c, scheme)
}

// PodConfigClient is a controller-runtime client of c that knows core and Berth's kinds.
func PodConfigClient(t testing.TB, c *cluster.Cluster) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = berthv1alpha1.AddToScheme(s)
	return newClient(t, c, s)
}

func newClient(t testing.TB, c *cluster.Cluster, s *runtime.Scheme) client.Client {
	t.Helper()
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// InstallSecondarySchedulerCRDOrFail is InstallSecondarySchedulerCRD for a test.
func InstallSecondarySchedulerCRDOrFail(ctx context.Context, t testing.TB, c *cluster.Cluster) {
	t.Helper()
	if err := InstallSecondarySchedulerCRD(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
}
