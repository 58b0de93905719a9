//go:build berthbenchfloor

package registry

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

// BenchFloorPlugins are Score plugins that do nothing, built only into bin/berth-scheduler-floor
// (make bench): a profile with three of them measures what three more Score plugins cost in the
// framework alone, the floor under the full Berth profile's throughput. The names live in
// schedconfig, whose configuration check must know them without linking the registry.
var BenchFloorPlugins = schedconfig.BenchFloorPlugins

type floorScore struct{ name string }

func (p floorScore) Name() string { return p.name }

func (floorScore) Score(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) (int64, *fwk.Status) {
	return 0, nil
}

func (floorScore) ScoreExtensions() fwk.ScoreExtensions { return nil }

func init() {
	for _, name := range BenchFloorPlugins {
		extra[name] = func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
			return floorScore{name: name}, nil
		}
	}
}
