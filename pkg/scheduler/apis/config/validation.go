package config

import (
	"fmt"
	"math"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1 "github.com/berth-sched/berth/api/config/v1"
)

// Bounds the CRD cannot express or that raw configurations must meet too.
const (
	// MaxDefaultRequestsMultiplier: beyond it a typo, not a policy.
	MaxDefaultRequestsMultiplier = 1000
	// MaxVarianceMargin: ten deviations of headroom already keep any node that swings at all
	// empty; more is a typo.
	MaxVarianceMargin = 10
	// MaxAssumePulledFor bounds the window; past an hour the "pull under way" claim is fiction.
	MaxAssumePulledFor = time.Hour
	// MaxRecords bounds the LRU so a typo cannot make the scheduler hold gigabytes (a record
	// with 10 nodes is a few KiB).
	MaxRecords  = 1_000_000
	MaxTopNodes = 1000
	// MaxSmoothingWindowSize: the deviation is scaled by its root; past ~30× the measured
	// deviation says nothing.
	MaxSmoothingWindowSize = 1000
)

// Every Validate function takes defaulted args and the path they sit at (nil: errors name the
// args' own fields).

// checkKind refuses args that name another kind: a configuration meant for another plugin
// pasted under this plugin's name would otherwise decode partly and be half-applied.
func checkKind(root *field.Path, obj metav1.TypeMeta, want string) field.ErrorList {
	if obj.Kind != "" && obj.Kind != want {
		return field.ErrorList{field.Invalid(root.Child("kind"), obj.Kind, "must be "+want+" or omitted")}
	}
	return nil
}

// ValidateLoadAwareArgs checks the args TargetLoadPacking and LoadVariationRiskBalancing share.
func ValidateLoadAwareArgs(root *field.Path, a *configv1.LoadAwareArgs) field.ErrorList {
	var errs field.ErrorList
	p := root.Child("watcherAddress")
	if a.WatcherAddress == "" {
		errs = append(errs, field.Required(p, "berth-scheduler reads a load watcher service (library mode via metricProvider is not supported); set it to the load watcher URL, e.g. http://berth-loadwatcher.berth-system:2020"))
	} else if u, err := url.Parse(a.WatcherAddress); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, field.Invalid(p, a.WatcherAddress, "must be an absolute http:// or https:// URL with a host"))
	} else if u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, field.Invalid(p, a.WatcherAddress, "must not carry a query or fragment; /watcher?pods=true is appended"))
	}
	if mp := a.MetricProvider; mp != nil {
		switch mp.Type {
		case "", configv1.KubernetesMetricsServer, configv1.Prometheus, configv1.SignalFx:
		default:
			errs = append(errs, field.NotSupported(root.Child("metricProvider", "type"), mp.Type,
				[]string{string(configv1.KubernetesMetricsServer), string(configv1.Prometheus), string(configv1.SignalFx)}))
		}
	}
	between := func(name string, v *int64, lo, hi int64) {
		if *v < lo || *v > hi {
			errs = append(errs, field.Invalid(root.Child(name), *v, fmt.Sprintf("must be between %d and %d", lo, hi)))
		}
	}
	const day = 86400
	between("metricsExpirySeconds", a.MetricsExpirySeconds, 1, day)
	between("refreshIntervalSeconds", a.RefreshIntervalSeconds, 1, 3600)
	between("watcherTimeoutSeconds", a.WatcherTimeoutSeconds, 1, 600)
	between("assumedPodExpirySeconds", a.AssumedPodExpirySeconds, 1, day)
	between("estimateSeconds", a.EstimateSeconds, 0, day)
	between("podEstimateSecondsLimit", a.PodEstimateSecondsLimit, 0, day)
	between("neutralScore", a.NeutralScore, 0, 100)
	switch a.ExpiredMetricsAction {
	case configv1.ExpiredMetricsNeutral, configv1.ExpiredMetricsBlock:
	default:
		errs = append(errs, field.NotSupported(root.Child("expiredMetricsAction"), a.ExpiredMetricsAction,
			[]string{string(configv1.ExpiredMetricsNeutral), string(configv1.ExpiredMetricsBlock)}))
	}
	for r, v := range a.UsageThresholds {
		rp := root.Child("usageThresholds").Key(string(r))
		if r != corev1.ResourceCPU && r != corev1.ResourceMemory {
			errs = append(errs, field.NotSupported(rp, r, []string{string(corev1.ResourceCPU), string(corev1.ResourceMemory)}))
			continue
		}
		if v < 1 || v > 100 {
			errs = append(errs, field.Invalid(rp, v, "must be a percentage between 1 and 100"))
		}
	}
	return append(errs, validateWorkloadProfiles(root.Child("workloadProfiles"), a.WorkloadProfiles)...)
}

// validateWorkloadProfiles checks defaulted workload profile args (nil: not defaulted, as
// upstream configurations decode before defaulting; nothing to check).
func validateWorkloadProfiles(root *field.Path, a *configv1.WorkloadProfileArgs) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	between := func(name string, v, lo, hi int64) {
		if v < lo || v > hi {
			errs = append(errs, field.Invalid(root.Child(name), v, fmt.Sprintf("must be between %d and %d", lo, hi)))
		}
	}
	between("minSiblings", int64(*a.MinSiblings), 1, 1000)
	between("percentile", int64(*a.Percentile), 1, 100)
	between("maxSpreadPercent", int64(*a.MaxSpreadPercent), 0, 1000)
	between("marginPercent", int64(*a.MarginPercent), 0, 1000)
	between("maxWorkloads", int64(*a.MaxWorkloads), 1, 1_000_000)
	between("maxAgeSeconds", *a.MaxAgeSeconds, 1, 7*86400)
	between("minAgeSeconds", *a.MinAgeSeconds, 1, 3600)
	// why minSiblings: a workload that may keep fewer samples than a profile needs would
	// never get one, silently.
	between("maxSamples", int64(*a.MaxSamples), int64(*a.MinSiblings), 10_000)
	between("namespaceMinPods", int64(*a.NamespaceMinPods), 0, int64(configv1.ProfileNamespaceMaxSamples))
	return errs
}

// ValidateTargetLoadPackingArgs checks TargetLoadPacking's args.
func ValidateTargetLoadPackingArgs(root *field.Path, a *configv1.TargetLoadPackingArgs) field.ErrorList {
	errs := checkKind(root, a.TypeMeta, "TargetLoadPackingArgs")
	errs = append(errs, ValidateLoadAwareArgs(root, &a.LoadAwareArgs)...)
	// 100 is allowed: the score is then 100 up to full load, 0 beyond.
	if t := *a.TargetUtilization; t < 1 || t > 100 {
		errs = append(errs, field.Invalid(root.Child("targetUtilization"), t, "must be a percentage between 1 and 100"))
	}
	for r, q := range a.DefaultRequests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(root.Child("defaultRequests").Key(string(r)), q.String(), "must not be negative"))
		}
	}
	if _, err := DefaultRequestsMultiplier(*a.DefaultRequestsMultiplier); err != nil {
		errs = append(errs, field.Invalid(root.Child("defaultRequestsMultiplier"), *a.DefaultRequestsMultiplier, err.Error()))
	}
	if _, err := VarianceMargin(*a.VarianceMargin); err != nil {
		errs = append(errs, field.Invalid(root.Child("varianceMargin"), string(*a.VarianceMargin), err.Error()))
	}
	return errs
}

// VarianceMargin parses TargetLoadPacking's varianceMargin (a decimal in a string).
func VarianceMargin(d configv1.Decimal) (float64, error) {
	m, err := d.Float64()
	if err != nil {
		return 0, fmt.Errorf("must be a decimal number in a string, e.g. \"1\"")
	}
	if math.IsNaN(m) || m < 0 || m > MaxVarianceMargin {
		return 0, fmt.Errorf("must be between 0 and %d", MaxVarianceMargin)
	}
	return m, nil
}

// DefaultRequestsMultiplier parses TargetLoadPacking's multiplier (a decimal in a string).
func DefaultRequestsMultiplier(s string) (float64, error) {
	m, err := configv1.Decimal(s).Float64()
	if err != nil {
		return 0, fmt.Errorf("must be a decimal number in a string, e.g. \"1.5\"")
	}
	if math.IsNaN(m) || m <= 0 || m > MaxDefaultRequestsMultiplier {
		return 0, fmt.Errorf("must be greater than 0 and at most %d", MaxDefaultRequestsMultiplier)
	}
	return m, nil
}

// ValidateLoadVariationRiskBalancingArgs checks LoadVariationRiskBalancing's args.
func ValidateLoadVariationRiskBalancingArgs(root *field.Path, a *configv1.LoadVariationRiskBalancingArgs) field.ErrorList {
	errs := checkKind(root, a.TypeMeta, "LoadVariationRiskBalancingArgs")
	errs = append(errs, ValidateLoadAwareArgs(root, &a.LoadAwareArgs)...)
	check := func(name string, d configv1.Decimal) {
		v, err := d.Float64()
		if err != nil {
			errs = append(errs, field.Invalid(root.Child(name), string(d), err.Error()))
		} else if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			errs = append(errs, field.Invalid(root.Child(name), v, "must be a finite number >= 0"))
		}
	}
	check("safeVarianceMargin", *a.SafeVarianceMargin)
	check("safeVarianceSensitivity", *a.SafeVarianceSensitivity)
	return errs
}

// ValidateSySchedArgs checks SySched's args.
func ValidateSySchedArgs(root *field.Path, a *configv1.SySchedArgs) field.ErrorList {
	errs := checkKind(root, a.TypeMeta, "SySchedArgs")
	conflict := func(alias, aliasName, canonical, canonicalName string) {
		if alias != "" && alias != canonical {
			errs = append(errs, field.Invalid(root.Child(aliasName), alias,
				fmt.Sprintf("conflicts with %s=%q; set only one of them", canonicalName, canonical)))
		}
	}
	conflict(a.SyschedCRDNamespace, "syschedCRDNamespace", a.DefaultProfileNamespace, "defaultProfileNamespace")
	conflict(a.SyschedFullCRDName, "syschedFullCRDName", a.DefaultProfileName, "defaultProfileName")
	for _, msg := range validation.IsDNS1123Label(a.DefaultProfileNamespace) {
		errs = append(errs, field.Invalid(root.Child("defaultProfileNamespace"), a.DefaultProfileNamespace, msg))
	}
	for _, msg := range validation.IsDNS1123Subdomain(a.DefaultProfileName) {
		errs = append(errs, field.Invalid(root.Child("defaultProfileName"), a.DefaultProfileName, msg))
	}
	oneOf := func(name, v string, allowed ...string) {
		for _, x := range allowed {
			if v == x {
				return
			}
		}
		errs = append(errs, field.NotSupported(root.Child(name), v, allowed))
	}
	oneOf("daemonSetPods", a.DaemonSetPods, configv1.DaemonSetPodsExclude, configv1.DaemonSetPodsCount)
	oneOf("runtimeDefault", a.RuntimeDefault, configv1.RuntimeDefaultContainerd, configv1.RuntimeDefaultFull)
	oneOf("unsetProfile", a.UnsetProfile, configv1.UnsetUnconfined, configv1.UnsetRuntimeDefault)
	if a.RuntimeDefaultProfileName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(a.RuntimeDefaultProfileName) {
			errs = append(errs, field.Invalid(root.Child("runtimeDefaultProfileName"), a.RuntimeDefaultProfileName, msg))
		}
	}
	if a.ExcludedPodSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(a.ExcludedPodSelector,
			metav1validation.LabelSelectorValidationOptions{}, root.Child("excludedPodSelector"))...)
	}
	return errs
}

// ValidateNodeImageLocalityArgs checks NodeImageLocality's args.
func ValidateNodeImageLocalityArgs(root *field.Path, a *configv1.NodeImageLocalityArgs) field.ErrorList {
	errs := checkKind(root, a.TypeMeta, "NodeImageLocalityArgs")
	if d := a.AssumePulledFor.Duration; d < 0 || d > MaxAssumePulledFor {
		errs = append(errs, field.Invalid(root.Child("assumePulledFor"), d.String(),
			fmt.Sprintf("must be between 0 (off) and %s", MaxAssumePulledFor)))
	}
	return errs
}

// ValidateInstanceIsolationArgs checks InstanceIsolation's args.
func ValidateInstanceIsolationArgs(root *field.Path, a *configv1.InstanceIsolationArgs) field.ErrorList {
	errs := checkKind(root, a.TypeMeta, "InstanceIsolationArgs")
	p := root.Child("classLabels")
	if len(a.ClassLabels) == 0 {
		errs = append(errs, field.Required(p, "must name at least one pod label key (default "+fmt.Sprint(configv1.DefaultClassLabels)+")"))
	}
	errs = append(errs, uniqueNames(p, a.ClassLabels, "must be a label key: ", validation.IsQualifiedName)...)
	errs = append(errs, uniqueNames(root.Child("exemptNamespaces"), a.ExemptNamespaces, "must be a namespace name: ", validation.IsDNS1123Label)...)
	if a.ExemptSelector != nil {
		p = root.Child("exemptSelector")
		errs = append(errs, metav1validation.ValidateLabelSelector(a.ExemptSelector, metav1validation.LabelSelectorValidationOptions{}, p)...)
		if len(errs) == 0 {
			if _, err := metav1.LabelSelectorAsSelector(a.ExemptSelector); err != nil {
				errs = append(errs, field.Invalid(p, a.ExemptSelector.String(), err.Error()))
			}
		}
	}
	return errs
}

// uniqueNames checks each name of a list and refuses repeats.
func uniqueNames(p *field.Path, names []string, what string, check func(string) []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, n := range names {
		for _, msg := range check(n) {
			errs = append(errs, field.Invalid(p.Index(i), n, what+msg))
		}
		if seen[n] {
			errs = append(errs, field.Duplicate(p.Index(i), n))
		}
		seen[n] = true
	}
	return errs
}

// ValidateDecisionRecordArgs checks DecisionRecord's args.
func ValidateDecisionRecordArgs(root *field.Path, a *configv1.DecisionRecordArgs) field.ErrorList {
	errs := checkKind(root, a.TypeMeta, "DecisionRecordArgs")
	if v := *a.Records; v < 1 || v > MaxRecords {
		errs = append(errs, field.Invalid(root.Child("records"), v,
			fmt.Sprintf("must be between 1 and %d (leave the plugin out of the profile to record nothing)", MaxRecords)))
	}
	if v := *a.TopNodes; v < 1 || v > MaxTopNodes {
		errs = append(errs, field.Invalid(root.Child("topNodes"), v, fmt.Sprintf("must be between 1 and %d", MaxTopNodes)))
	}
	switch *a.Summary {
	case configv1.SummaryNone, configv1.SummaryEvent:
	default:
		errs = append(errs, field.NotSupported(root.Child("summary"), *a.Summary, []string{string(configv1.SummaryNone), string(configv1.SummaryEvent)}))
	}
	return errs
}

// ValidateLowRiskOverCommitmentArgs checks LowRiskOverCommitment's args.
func ValidateLowRiskOverCommitmentArgs(root *field.Path, a *configv1.LowRiskOverCommitmentArgs) field.ErrorList {
	errs := checkKind(root, a.TypeMeta, "LowRiskOverCommitmentArgs")
	errs = append(errs, ValidateLoadAwareArgs(root, &a.LoadAwareArgs)...)
	if v := *a.SmoothingWindowSize; v < 1 || v > MaxSmoothingWindowSize {
		errs = append(errs, field.Invalid(root.Child("smoothingWindowSize"), v, fmt.Sprintf("must be between 1 and %d", MaxSmoothingWindowSize)))
	}
	for _, w := range []struct {
		name string
		d    *configv1.Decimal
	}{{"cpu", a.RiskLimitWeights.CPU}, {"memory", a.RiskLimitWeights.Memory}} {
		if _, err := RiskLimitWeight(*w.d); err != nil {
			errs = append(errs, field.Invalid(root.Child("riskLimitWeights", w.name), string(*w.d), err.Error()))
		}
	}
	return errs
}

// RiskLimitWeight parses one of LowRiskOverCommitment's weights (a decimal in a string).
func RiskLimitWeight(d configv1.Decimal) (float64, error) {
	w, err := d.Float64()
	if err != nil || math.IsNaN(w) || w < 0 || w > 1 {
		return 0, fmt.Errorf("must be a decimal between 0 (load risk only) and 1 (limit risk only)")
	}
	return w, nil
}
