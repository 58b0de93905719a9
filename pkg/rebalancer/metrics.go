package rebalancer

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric names (the lead's evictions alert reads berth_rebalancer_evictions_total).
var (
	nodesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "berth_rebalancer_nodes",
		Help: "Nodes of the pool in the last round by class: hot (acted on), cold, normal, unknown (stale or missing metrics).",
	}, []string{"rebalancer", "class"})
	evictionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_rebalancer_evictions_total",
		Help: "Eviction requests by result: evicted, dry_run, pdb_refused, gone, error.",
	}, []string{"rebalancer", "result"})
	skipsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_rebalancer_skips_total",
		Help: "Pods on hot nodes left in place, by reason.",
	}, []string{"rebalancer", "reason"})
	roundsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_rebalancer_rounds_total",
		Help: "Rounds by outcome: the Active condition's reason (Acting, NoHotNodes, TooFewColdNodes, NoNodesSelected, MetricsUnavailable, InvalidSpec).",
	}, []string{"rebalancer", "outcome"})
	watcherErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_rebalancer_watcher_errors_total",
		Help: "Load watcher answers the rebalancer could not use, by kind: transport, http_status, decode, empty, invalid_values.",
	}, []string{"rebalancer", "kind"})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		crmetrics.Registry.MustRegister(nodesGauge, evictionsTotal, skipsTotal, roundsTotal, watcherErrors)
	})
}

func recordRound(name string, res *Result) {
	counts := map[Class]int{}
	for _, n := range res.Nodes {
		c := n.Class
		if c == Hot && !n.Acting {
			c = Normal // hot but not (yet) acted on: not counted as hot
		}
		counts[c]++
	}
	for _, c := range []Class{Hot, Cold, Normal, Unknown} {
		nodesGauge.WithLabelValues(name, c.String()).Set(float64(counts[c]))
	}
	roundsTotal.WithLabelValues(name, res.Reason).Inc()
	for _, o := range res.Outcomes {
		evictionsTotal.WithLabelValues(name, string(o)).Inc()
	}
	for _, s := range res.Skipped {
		skipsTotal.WithLabelValues(name, s.Reason).Inc()
	}
}
