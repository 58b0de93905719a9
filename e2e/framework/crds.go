package framework

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/berth-sched/berth/api/crds"
	"github.com/berth-sched/berth/e2e/cluster"
)

// InstallSecondarySchedulerCRD installs the SecondaryScheduler CRD the chart ships and waits
// until it is served.
func InstallSecondarySchedulerCRD(ctx context.Context, rc *rest.Config) error {
	crd, err := crds.SecondaryScheduler()
	if err != nil {
		return err
	}
	return cluster.InstallCRDs(ctx, rc, crd)
}
