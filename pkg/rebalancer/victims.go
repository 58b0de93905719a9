package rebalancer

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// Skip reasons (the berth_rebalancer_skips_total label and the round's log).
const (
	SkipTerminating    = "terminating"
	SkipNotRunning     = "not_running"
	SkipOtherScheduler = "other_scheduler"
	SkipMirror         = "mirror_or_static"
	SkipDaemonSet      = "daemonset"
	SkipNoController   = "no_controller"
	SkipNamespace      = "protected_namespace"
	SkipPriority       = "priority"
	SkipOptOut         = "opted_out"
	SkipLocalStorage   = "local_storage"
	SkipPVC            = "pvc"
	SkipOwnerCooldown  = "owner_cooldown"
	SkipNodeLimit      = "node_limit"
	SkipNamespaceLimit = "namespace_limit"
	SkipOwnerLimit     = "owner_limit"
	SkipRoundLimit     = "round_limit"
	SkipNoFit          = "no_cold_node_fits"
	SkipPDB            = "pdb"
	SkipGone           = "gone"
	SkipError          = "eviction_error"
	// Node-level skips.
	SkipNodeCooldown  = "node_received_moved_pods"
	SkipAwaitMetrics  = "metrics_predate_last_move"
	SkipAnomalyRounds = "not_hot_long_enough"
)

// mirrorAnnotation marks a static pod's mirror (the kubelet's ConfigMirrorAnnotationKey).
const mirrorAnnotation = "kubernetes.io/config.mirror"

// Ineligible says why pod may never be moved under p ("" when it may).
func (p *Policy) Ineligible(pod *corev1.Pod) string {
	ctrl := metav1.GetControllerOf(pod)
	switch {
	case pod.DeletionTimestamp != nil:
		return SkipTerminating
	case pod.Status.Phase != corev1.PodRunning:
		return SkipNotRunning
	case !p.SchedulerNames.Has(pod.Spec.SchedulerName):
		return SkipOtherScheduler
	case pod.Annotations[mirrorAnnotation] != "" || (ctrl != nil && ctrl.Kind == "Node"):
		return SkipMirror
	case ctrl == nil:
		return SkipNoController
	case ctrl.Kind == "DaemonSet":
		return SkipDaemonSet
	case p.ProtectedNS.Has(pod.Namespace):
		return SkipNamespace
	case pod.Spec.Priority != nil && *pod.Spec.Priority > p.MaxPriority:
		return SkipPriority
	case pod.Annotations[berthv1alpha1.RebalancerOptOutAnnotation] == "false":
		return SkipOptOut
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case (v.EmptyDir != nil || v.HostPath != nil) && !p.AllowLocalStorage:
			return SkipLocalStorage
		case (v.PersistentVolumeClaim != nil || v.Ephemeral != nil) && !p.AllowPVC:
			return SkipPVC
		}
	}
	return ""
}

// PodLoad is a candidate's use: in percent of its node (what moving it takes off that node) and
// in absolute units (what it adds to another node).
type PodLoad struct {
	Percent       Usage
	MilliCPU      int64
	MemoryBytes   int64
	Measured      bool
	qos           int
	priority      int32
	pod           *corev1.Pod
	controllerUID string
}

// podLoad reads a pod's use from the agent's measurement when the watcher has one, else from its
// requests (the numbers the scheduler placed it by).
func podLoad(pod *corev1.Pod, node *corev1.Node, measured map[string]loadapi.PodUsage) PodLoad {
	alloc := allocatable(node)
	pl := PodLoad{pod: pod, qos: qosRank(pod)}
	if pod.Spec.Priority != nil {
		pl.priority = *pod.Spec.Priority
	}
	if c := metav1.GetControllerOf(pod); c != nil {
		pl.controllerUID = string(c.UID)
	}
	if m, ok := measured[string(pod.UID)]; ok {
		pl.Measured = true
		pl.Percent = Usage{CPU: m.Latest.CPU, Memory: m.Latest.Memory}
		pl.MilliCPU, pl.MemoryBytes = m.CPUMillicores, m.MemoryBytes
		if pl.MilliCPU == 0 && alloc.milliCPU > 0 {
			pl.MilliCPU = int64(m.Latest.CPU / 100 * float64(alloc.milliCPU))
		}
		if pl.MemoryBytes == 0 && alloc.memory > 0 {
			pl.MemoryBytes = int64(m.Latest.Memory / 100 * float64(alloc.memory))
		}
		return pl
	}
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	pl.MilliCPU = req.Cpu().MilliValue()
	pl.MemoryBytes = req.Memory().Value()
	pl.Percent = alloc.percent(pl.MilliCPU, pl.MemoryBytes)
	return pl
}

type capacity struct{ milliCPU, memory int64 }

func allocatable(n *corev1.Node) capacity {
	a := n.Status.Allocatable
	if len(a) == 0 {
		a = n.Status.Capacity
	}
	return capacity{milliCPU: a.Cpu().MilliValue(), memory: a.Memory().Value()}
}

func (c capacity) percent(milliCPU, memory int64) Usage {
	var u Usage
	if c.milliCPU > 0 {
		u.CPU = float64(milliCPU) / float64(c.milliCPU) * 100
	}
	if c.memory > 0 {
		u.Memory = float64(memory) / float64(c.memory) * 100
	}
	return u
}

// qosRank orders QoS classes for eviction: BestEffort first, Guaranteed last.
func qosRank(pod *corev1.Pod) int {
	switch qosClass(pod) {
	case corev1.PodQOSBestEffort:
		return 0
	case corev1.PodQOSBurstable:
		return 1
	}
	return 2
}

func qosClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	// The kubelet sets status.qosClass; a pod it has not reported yet is classed from its
	// containers (requests equal to limits for cpu and memory everywhere: Guaranteed).
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	lim := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	if len(req) == 0 && len(lim) == 0 {
		return corev1.PodQOSBestEffort
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		l, ok := lim[r]
		q := req[r]
		if !ok || q.Cmp(l) != 0 {
			return corev1.PodQOSBurstable
		}
	}
	return corev1.PodQOSGuaranteed
}

// Order sorts candidates for eviction: lower priority first, then BestEffort, Burstable,
// Guaranteed, then the largest use of the hot resources (the sum over them), then name for a
// stable order. The planner walks this order and takes the first candidate that fits somewhere,
// which is the largest that still fits.
func Order(c []PodLoad, hot []Resource) {
	use := func(p PodLoad) float64 {
		var s float64
		for _, r := range hot {
			s += p.Percent.of(r)
		}
		return s
	}
	sort.SliceStable(c, func(i, j int) bool {
		a, b := c[i], c[j]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		if a.qos != b.qos {
			return a.qos < b.qos
		}
		if ua, ub := use(a), use(b); ua != ub {
			return ua > ub
		}
		return a.pod.Namespace+"/"+a.pod.Name < b.pod.Namespace+"/"+b.pod.Name
	})
}
