package v1

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults. Unlike upstream, defaulting fills only what is unset: an explicit out-of-range value
// stays, so validation names it instead of silently replacing it.
const (
	DefaultMetricsExpirySeconds    int64 = 300
	DefaultRefreshIntervalSeconds  int64 = 30
	DefaultWatcherTimeoutSeconds   int64 = 10
	DefaultAssumedPodExpirySeconds int64 = 300
	DefaultNeutralScore            int64 = 50

	DefaultTargetUtilization  int64   = 40
	DefaultRequestsMilliCores int64   = 1000
	DefaultRequestsMultiplier string  = "1.5"
	DefaultVarianceMargin     Decimal = "0"

	DefaultSafeVarianceMargin      Decimal = "1"
	DefaultSafeVarianceSensitivity Decimal = "1"

	DefaultProfileNamespace = "default"
	DefaultProfileName      = "all-syscalls"

	// DefaultAssumePulledFor is long enough for a large pull to finish and the agent's next
	// inventory (every 30s by default) to report it, short enough that a failed pull stops
	// attracting pods soon.
	DefaultAssumePulledFor = 5 * time.Minute

	DefaultRecords  int32 = 1000
	DefaultTopNodes int32 = 10
)

// DefaultClassLabels are the pod label keys that carry an instance class: IPP's own key, so
// pods written for the Instance-per-Pod webhook keep working, and Berth's.
var DefaultClassLabels = []string{"ipp-class", "berth.dev/instance-class"}

func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

// SetDefaults_LoadAwareArgs fills unset fields; the watcher address loses surrounding space and
// trailing slashes (/watcher is appended to it).
func SetDefaults_LoadAwareArgs(obj *LoadAwareArgs) {
	obj.WatcherAddress = strings.TrimRight(strings.TrimSpace(obj.WatcherAddress), "/")
	setDefault(&obj.MetricsExpirySeconds, DefaultMetricsExpirySeconds)
	setDefault(&obj.RefreshIntervalSeconds, DefaultRefreshIntervalSeconds)
	setDefault(&obj.WatcherTimeoutSeconds, DefaultWatcherTimeoutSeconds)
	setDefault(&obj.AssumedPodExpirySeconds, DefaultAssumedPodExpirySeconds)
	setDefault(&obj.EstimateSeconds, 0)
	setDefault(&obj.PodEstimateSecondsLimit, 0)
	setDefault(&obj.NeutralScore, DefaultNeutralScore)
	if obj.ExpiredMetricsAction == "" {
		obj.ExpiredMetricsAction = ExpiredMetricsNeutral
	}
}

// SetDefaults_TargetLoadPackingArgs fills unset fields.
func SetDefaults_TargetLoadPackingArgs(obj *TargetLoadPackingArgs) {
	SetDefaults_LoadAwareArgs(&obj.LoadAwareArgs)
	setDefault(&obj.TargetUtilization, DefaultTargetUtilization)
	if obj.DefaultRequests == nil {
		obj.DefaultRequests = corev1.ResourceList{}
	}
	if _, ok := obj.DefaultRequests[corev1.ResourceCPU]; !ok {
		obj.DefaultRequests[corev1.ResourceCPU] = *resource.NewMilliQuantity(DefaultRequestsMilliCores, resource.DecimalSI)
	}
	setDefault(&obj.DefaultRequestsMultiplier, DefaultRequestsMultiplier)
	setDefault(&obj.VarianceMargin, DefaultVarianceMargin)
}

// SetDefaults_LoadVariationRiskBalancingArgs fills unset fields.
func SetDefaults_LoadVariationRiskBalancingArgs(obj *LoadVariationRiskBalancingArgs) {
	SetDefaults_LoadAwareArgs(&obj.LoadAwareArgs)
	setDefault(&obj.SafeVarianceMargin, DefaultSafeVarianceMargin)
	setDefault(&obj.SafeVarianceSensitivity, DefaultSafeVarianceSensitivity)
}

// SetDefaults_SySchedArgs fills unset fields. A deprecated alias fills its field when that is
// unset; when both are set and differ, validation names the conflict.
func SetDefaults_SySchedArgs(obj *SySchedArgs) {
	if obj.DefaultProfileNamespace == "" {
		obj.DefaultProfileNamespace = obj.SyschedCRDNamespace
	}
	if obj.DefaultProfileName == "" {
		obj.DefaultProfileName = obj.SyschedFullCRDName
	}
	if obj.DefaultProfileNamespace == "" {
		obj.DefaultProfileNamespace = DefaultProfileNamespace
	}
	if obj.DefaultProfileName == "" {
		obj.DefaultProfileName = DefaultProfileName
	}
	if obj.DaemonSetPods == "" {
		obj.DaemonSetPods = DaemonSetPodsExclude
	}
	if obj.RuntimeDefault == "" {
		obj.RuntimeDefault = RuntimeDefaultContainerd
	}
	if obj.UnsetProfile == "" {
		obj.UnsetProfile = UnsetUnconfined
	}
}

// SetDefaults_NodeImageLocalityArgs fills unset fields.
func SetDefaults_NodeImageLocalityArgs(obj *NodeImageLocalityArgs) {
	setDefault(&obj.AssumePulledFor, metav1.Duration{Duration: DefaultAssumePulledFor})
	setDefault(&obj.UseNodeStatus, true)
	setDefault(&obj.TieBreakSmallImages, true)
}

// SetDefaults_InstanceIsolationArgs fills unset fields; an explicit empty classLabels stays
// (and is refused).
func SetDefaults_InstanceIsolationArgs(obj *InstanceIsolationArgs) {
	if obj.ClassLabels == nil {
		obj.ClassLabels = append([]string(nil), DefaultClassLabels...)
	}
	setDefault(&obj.Strict, false)
	setDefault(&obj.SpreadReplicas, false)
}

// SetDefaults_DecisionRecordArgs fills unset fields.
func SetDefaults_DecisionRecordArgs(obj *DecisionRecordArgs) {
	setDefault(&obj.Records, DefaultRecords)
	setDefault(&obj.TopNodes, DefaultTopNodes)
	if obj.Summary == nil || *obj.Summary == "" {
		s := SummaryNone
		obj.Summary = &s
	}
}
