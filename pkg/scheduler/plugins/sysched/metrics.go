package sysched

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// inputIssues counts what SySched had to read around: bindings skipped because their profile
// is missing, profiles missing, node-status objects it could not use. Scheduling goes on in
// every case; the counter is what an alert or a dashboard watches.
var inputIssues = metrics.NewCounterVec(&metrics.CounterOpts{
	Subsystem:      "berth_sysched",
	Name:           "input_issues_total",
	Help:           "SySched inputs it read around, by reason (binding_profile_missing, profile_missing, profile_unknown_syscall, node_status_unknown_node, node_status_malformed).",
	StabilityLevel: metrics.ALPHA,
}, []string{"reason"})

// podsRetried counts pods handed back to the scheduling queue because a profile they waited
// for was installed (requeue.go).
var podsRetried = metrics.NewCounter(&metrics.CounterOpts{
	Subsystem:      "berth_sysched",
	Name:           "pods_retried_total",
	Help:           "Pods refused for a seccomp profile not installed that SySched handed back to the scheduling queue when SPO reported the profile Installed (or stopped reporting it).",
	StabilityLevel: metrics.ALPHA,
})

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(inputIssues, podsRetried) })
}
