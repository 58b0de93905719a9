// Package registry lists the out-of-tree plugins that berth-scheduler adds to the upstream
// scheduler framework. Each plugin issue adds its factory here; nothing else needs to change.
package registry

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/berth-sched/berth/pkg/scheduler/decisionrecord"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/imagelocality"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/instanceisolation"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadvariationriskbalancing"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/lowriskovercommitment"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/targetloadpacking"
)

// extra holds plugins only bench builds register (benchfloor.go); empty in every release build.
var extra = fwkruntime.Registry{}

// Plugins maps plugin names to factories. Names match upstream scheduler-plugins where a
// plugin exists there, so an existing KubeSchedulerConfiguration keeps working.
func Plugins() fwkruntime.Registry {
	r := fwkruntime.Registry{
		targetloadpacking.Name:          targetloadpacking.New,
		loadvariationriskbalancing.Name: loadvariationriskbalancing.New,
		lowriskovercommitment.Name:      lowriskovercommitment.New,
		sysched.Name:                    sysched.New,
		imagelocality.Name:              imagelocality.New,
		instanceisolation.Name:          instanceisolation.New,
		// The scheduler command binds DecisionRecord's factory to its recorder; this one only
		// parses the args (configuration validation).
		decisionrecord.Name: decisionrecord.New,
	}
	for name, f := range extra {
		r[name] = f
	}
	return r
}

// Options turns Plugins into the upstream command's registry options.
func Options() []app.Option {
	var opts []app.Option
	for name, factory := range Plugins() {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}
