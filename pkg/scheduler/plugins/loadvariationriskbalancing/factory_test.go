package loadvariationriskbalancing

import (
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// The registry adds New as a framework factory; break the build here, not there.
var _ fwkruntime.PluginFactory = New
