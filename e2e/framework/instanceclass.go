package framework

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/berth-sched/berth/api/crds"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
)

// InstanceClassGVR is the InstanceClass resource (cluster-scoped).
var InstanceClassGVR = berthv1alpha1.GroupVersion.WithResource("instanceclasses")

// InstallInstanceClassCRD installs the generated InstanceClass CRD unless it exists, and waits
// until the API serves it.
func InstallInstanceClassCRD(ctx context.Context, cfg *rest.Config) error {
	crd, err := crds.Load("berth.dev_instanceclasses.yaml")
	if err != nil {
		return err
	}
	return cluster.InstallCRDs(ctx, cfg, crd)
}
