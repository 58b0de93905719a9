// Package registry lists the out-of-tree plugins that berth-scheduler adds to the upstream
// scheduler framework: the plugin table's factories (generated) and, in bench builds, no-op
// Score plugins.
package registry

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// extra holds plugins only bench builds register (benchfloor.go); empty in every release build.
var extra = fwkruntime.Registry{}

// Plugins maps plugin names to factories. Names match upstream scheduler-plugins where a
// plugin exists there, so an existing KubeSchedulerConfiguration keeps working.
func Plugins() fwkruntime.Registry {
	// One factory per row of the plugin table, generated from the same markers
	// (zz_generated.plugins.go). The scheduler command binds DecisionRecord's factory to its
	// recorder; the one here only parses the args (configuration validation).
	r := tableFactories()
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
