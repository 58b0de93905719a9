// Package config registers, decodes, defaults and validates the args of Berth's scheduler
// plugins, defined once in api/config/v1. Its validation functions take the path the args sit
// at: a plugin passes none (errors name the arg), berth-scheduler's configuration check passes
// nothing either and says which pluginConfig entry, the operator passes the SecondaryScheduler's
// own field (spec.plugins.targetLoadPacking.args), so every caller reports the same rules with
// the path its user edits.
package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Scheme knows the args kinds and their defaults.
//
// why not kube-scheduler's own scheme: registered there, the upstream loader would decode the
// args itself and report a misspelt arg as a strict-decoding error of the whole file, without
// the path of the args; kept as runtime.Unknown, they are decoded here, strictly, and every
// error names its field.
var Scheme = runtime.NewScheme()

func init() {
	// why: the kinds and their defaulting come from the plugin table (plugins.go), so a plugin
	// is registered where it is listed, once.
	utilruntime.Must(addPlugins(Scheme))
}
