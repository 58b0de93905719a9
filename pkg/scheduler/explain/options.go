// Package explain records why berth-scheduler placed (or could not place) each pod: per node
// the Filter that refused it and why, per feasible node every Score plugin's raw and
// normalised score, its weight and the total, and the chosen node. It wraps each profile's
// framework (so every enabled plugin is covered, upstream's in-tree ones included, without
// running any plugin twice), keeps a bounded LRU of records in memory, and serves them as
// JSON behind the scheduler's own authentication and authorisation.
package explain

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// DefaultRecords is how many pods' records are kept when recording is on.
	DefaultRecords = 1000
	// DefaultTopNodes is how many nodes a record keeps in detail (best-scored feasible
	// nodes, then refused ones); the rest are counted.
	DefaultTopNodes = 10
	// MaxRecords bounds the LRU so a typo cannot make the scheduler hold gigabytes.
	MaxRecords = 1_000_000
	// MaxTopNodes bounds the nodes kept per record.
	MaxTopNodes = 1000
	// Path is where the endpoint is served on the scheduler's secure port.
	Path = "/debug/berth/explain"
)

// Options configure one scheduler instance's recorder. Records == 0 turns recording off: no
// framework is wrapped and nothing is allocated.
type Options struct {
	// Records is the number of pods whose latest scheduling attempt is kept (LRU).
	Records int
	// TopNodes is the number of nodes kept in detail per record.
	TopNodes int
}

// Enabled reports whether recording is on.
func (o Options) Enabled() bool { return o.Records > 0 }

// Validate returns every bad field, named as its flag.
func (o Options) Validate() field.ErrorList {
	var errs field.ErrorList
	if o.Records < 0 || o.Records > MaxRecords {
		errs = append(errs, field.Invalid(field.NewPath("explain-records"), o.Records,
			fmt.Sprintf("must be between 0 (off) and %d", MaxRecords)))
	}
	if o.TopNodes < 1 || o.TopNodes > MaxTopNodes {
		errs = append(errs, field.Invalid(field.NewPath("explain-top-nodes"), o.TopNodes,
			fmt.Sprintf("must be between 1 and %d", MaxTopNodes)))
	}
	return errs
}
