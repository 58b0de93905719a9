// Package loadaware holds what TargetLoadPacking and LoadVariationRiskBalancing share: the
// arguments both accept, the background-refreshed load watcher snapshot, the accounting of pods
// placed since that snapshot, and the optional usage-threshold filter.
package loadaware

import (
	configv1 "github.com/berth-sched/berth/api/config/v1"
)

// CommonArgs are the arguments both plugins take, defined in api/config/v1 (defaults there,
// validation in pkg/scheduler/apis/config).
type CommonArgs = configv1.LoadAwareArgs

// ExpiredMetricsAction says what a node whose metrics are missing, stale or expired gets.
type ExpiredMetricsAction = configv1.ExpiredMetricsAction

const (
	// ExpiredMetricsNeutral scores such a node with NeutralScore and never filters it out.
	ExpiredMetricsNeutral = configv1.ExpiredMetricsNeutral
	// ExpiredMetricsBlock makes Filter reject such a node, as long as the load watcher itself
	// is answering with fresh data for other nodes (see README).
	ExpiredMetricsBlock = configv1.ExpiredMetricsBlock
)

// DefaultNeutralScore is the score of a node whose load is unknown when neutralScore is unset.
const DefaultNeutralScore = configv1.DefaultNeutralScore
