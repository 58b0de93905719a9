package v1

// WorkloadProfileArgs (Berth's; no peer has them) say how the load-aware plugins learn each
// workload's per-pod use from its measured replicas and count a new replica at it. A workload
// is the pod's controlling owner (a ReplicaSet counts as its Deployment) with its template's
// hash, in the pod's namespace.
type WorkloadProfileArgs struct {
	// Enabled turns the profiles on (default true). Off: every pod counts at the spec rule.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// MinSiblings is the fewest measured pods of a workload that make a usable profile
	// (default 3).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MinSiblings *int32 `json:"minSiblings,omitempty"`
	// Percentile of the siblings' window averages the profile takes, 1..100 (default 90):
	// high, so a new replica is not placed on the use of the workload's quietest pods.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percentile *int32 `json:"percentile,omitempty"`
	// MaxSpreadPercent is the largest coefficient of variation (standard deviation / mean, in
	// percent) of the siblings' averages, CPU or memory, for which they count as alike
	// (default 50). Above it the workload's pods differ too much to stand for each other, and
	// its new pods count at the spec rule.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxSpreadPercent *int32 `json:"maxSpreadPercent,omitempty"`
	// MarginPercent scales the spread into the estimate: profile × (1 + margin × spread), in
	// percent of the spread (default 100).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MarginPercent *int32 `json:"marginPercent,omitempty"`
	// MaxWorkloads bounds the memory: workloads kept, least recently measured out first
	// (default 10000).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxWorkloads *int32 `json:"maxWorkloads,omitempty"`
	// MaxSamples bounds the measured pods kept per workload, least recently measured out first
	// (default 64; at least minSiblings).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxSamples *int32 `json:"maxSamples,omitempty"`
	// MinAgeSeconds is how long a pod must have been bound before its use is learned: a
	// starting pod is not yet what it will use (default 60).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	MinAgeSeconds *int64 `json:"minAgeSeconds,omitempty"`
	// MaxAgeSeconds drops a pod's sample not measured again for this long (a deleted pod, an
	// old template), so a profile says what the workload uses now (default 3600).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	// +optional
	MaxAgeSeconds *int64 `json:"maxAgeSeconds,omitempty"`
	// NamespaceMinPods is the fewest measured pods with a CPU request in a pod's namespace
	// that estimate a pod without a usable profile (a bare pod, a replica of a workload not
	// learned yet): its CPU request × the namespace's use-to-request ratio, mean + margin ×
	// standard deviation; and a node's placed pods so estimated that the agents have not
	// measured yet count together, their means plus margin × the root of their summed
	// variances, not each at its own bound. 0: off, every such pod keeps the spec rule
	// (default 0; at most 256, the measured pods a namespace keeps; 10 is a sound value).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=256
	// +optional
	NamespaceMinPods *int32 `json:"namespaceMinPods,omitempty"`
}

// Workload profiles' defaults.
const (
	DefaultProfileMinSiblings      int32 = 3
	DefaultProfilePercentile       int32 = 90
	DefaultProfileMaxSpreadPercent int32 = 50
	DefaultProfileMarginPercent    int32 = 100
	DefaultProfileMaxWorkloads     int32 = 10000
	DefaultProfileMaxSamples       int32 = 64
	DefaultProfileMaxAgeSeconds    int64 = 3600
	DefaultProfileMinAgeSeconds    int64 = 60
	// why 0 (off): on the placement bench's growth shape the namespace estimates halved the
	// median prediction error but doubled the hottest node's overshoot (e2e/bench/placement
	// README, 2026-11-29); a cluster whose namespaces run alike pods may turn them on.
	DefaultProfileNamespaceMinPods int32 = 0
	// ProfileNamespaceMaxSamples bounds the measured pods a namespace keeps (least recently
	// measured out first), and so namespaceMinPods.
	ProfileNamespaceMaxSamples = 256
)

// SetDefaults_WorkloadProfileArgs fills unset fields.
func SetDefaults_WorkloadProfileArgs(obj *WorkloadProfileArgs) {
	setDefault(&obj.Enabled, true)
	setDefault(&obj.MinSiblings, DefaultProfileMinSiblings)
	setDefault(&obj.Percentile, DefaultProfilePercentile)
	setDefault(&obj.MaxSpreadPercent, DefaultProfileMaxSpreadPercent)
	setDefault(&obj.MarginPercent, DefaultProfileMarginPercent)
	setDefault(&obj.MaxWorkloads, DefaultProfileMaxWorkloads)
	setDefault(&obj.MaxSamples, DefaultProfileMaxSamples)
	setDefault(&obj.MaxAgeSeconds, DefaultProfileMaxAgeSeconds)
	setDefault(&obj.MinAgeSeconds, DefaultProfileMinAgeSeconds)
	setDefault(&obj.NamespaceMinPods, DefaultProfileNamespaceMinPods)
}
