package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group and version of the args: kube-scheduler's own, so a
// pluginConfig entry may name them with apiVersion/kind exactly as upstream plugins' args.
// The kinds and their defaulting functions are registered by the plugin table
// (pkg/scheduler/apis/config/plugins.go), one row per plugin.
var SchemeGroupVersion = schema.GroupVersion{Group: "kubescheduler.config.k8s.io", Version: "v1"}
