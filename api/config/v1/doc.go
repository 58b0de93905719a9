// Package v1 holds the arguments of Berth's scheduler plugins, version v1: the one definition
// of each plugin's args. berth-scheduler decodes a profile's pluginConfig into these types, the
// SecondaryScheduler CRD embeds them (so its schema and the scheduler read the same fields), and
// pkg/scheduler/apis/config defaults-registers and validates them.
//
// Adding an arg: its field here (with its CRD markers) and its default, its check in
// pkg/scheduler/apis/config/validation.go; `make generate` regenerates deepcopy, the CRD and the
// chart's values schema. A new plugin's args get a file of their own here (type and defaults, as
// lowriskovercommitment.go) and a row in pkg/scheduler/apis/config/plugins.go, which registers
// them.
//
// +kubebuilder:object:generate=true
package v1
