package decisionrecord

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// What the decision-record store holds: how many records and how many it dropped for room. A
// store at its capacity that evicts fast forgets pods before anyone asks; the dashboard shows
// both, so the plugin's capacity arg can be sized from them.
var (
	storedRecords = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem: "berth_decision_records", Name: "stored",
		Help:           "Decision records held in the scheduler's memory (at most the DecisionRecord plugin's capacity).",
		StabilityLevel: metrics.ALPHA,
	})
	evictedRecords = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem: "berth_decision_records", Name: "evicted_total",
		Help:           "Decision records dropped to make room for newer ones.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(storedRecords, evictedRecords) })
}
