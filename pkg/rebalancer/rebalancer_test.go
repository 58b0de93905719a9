package rebalancer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/loadapi"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func i32(v int32) *int32 { return &v }

func spec(mut ...func(*berthv1alpha1.RebalancerSpec)) *berthv1alpha1.RebalancerSpec {
	s := &berthv1alpha1.RebalancerSpec{
		WatcherAddress: "http://127.0.0.1:1",
		SchedulerNames: []string{"berth-scheduler"},
		LowThresholds:  berthv1alpha1.ResourceThresholds{CPU: i32(30), Memory: i32(30)},
		HighThresholds: berthv1alpha1.ResourceThresholds{CPU: i32(80), Memory: i32(80)},
		AnomalyRounds:  3,
		Limits:         berthv1alpha1.RebalancerLimits{OwnerCooldownSeconds: 600},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func policy(t *testing.T, mut ...func(*berthv1alpha1.RebalancerSpec)) *Policy {
	t.Helper()
	p, err := NewPolicy(spec(mut...), "berth-system")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewPolicyRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*berthv1alpha1.RebalancerSpec)
		want string // field named in the error; "" = valid
	}{
		{"defaults", func(*berthv1alpha1.RebalancerSpec) {}, ""},
		{"high above 100", func(s *berthv1alpha1.RebalancerSpec) { s.HighThresholds.CPU = i32(101) }, "spec.highThresholds.cpu"},
		{"negative low", func(s *berthv1alpha1.RebalancerSpec) { s.LowThresholds.Memory = i32(-1) }, "spec.lowThresholds.memory"},
		{"low equal high", func(s *berthv1alpha1.RebalancerSpec) { s.LowThresholds.CPU = i32(80) }, "spec.lowThresholds.cpu"},
		{"low above high", func(s *berthv1alpha1.RebalancerSpec) { s.LowThresholds.Memory = i32(90) }, "spec.lowThresholds.memory"},
		{"different resources", func(s *berthv1alpha1.RebalancerSpec) { s.LowThresholds.Memory = nil }, "spec.lowThresholds"},
		{"no high", func(s *berthv1alpha1.RebalancerSpec) {
			s.HighThresholds = berthv1alpha1.ResourceThresholds{}
			s.LowThresholds = berthv1alpha1.ResourceThresholds{}
		}, "spec.highThresholds"},
		{"default scheduler", func(s *berthv1alpha1.RebalancerSpec) { s.SchedulerNames = []string{"default-scheduler"} }, "spec.schedulerNames"},
		{"negative limit", func(s *berthv1alpha1.RebalancerSpec) { s.Limits.PerNode = -1 }, "spec.limits.perNode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPolicy(spec(tc.mut))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid spec refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want an error naming %s", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want+":"):
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	p := policy(t)
	cpuOnly := policy(t, func(s *berthv1alpha1.RebalancerSpec) {
		s.LowThresholds.Memory, s.HighThresholds.Memory = nil, nil
	})
	fresh := func(cpu, mem float64) *NodeLoad {
		return &NodeLoad{Usage: Usage{cpu, mem}, HasCPU: true, HasMemory: true, HasMetrics: true, Updated: t0.Add(-10 * time.Second)}
	}
	for _, tc := range []struct {
		name string
		p    *Policy
		l    *NodeLoad
		want Class
		over []Resource
		why  string
	}{
		{"missing", p, nil, Unknown, nil, "missing"},
		{"stale flag", p, func() *NodeLoad { l := fresh(95, 10); l.Stale = true; return l }(), Unknown, nil, "stale"},
		{"expired", p, func() *NodeLoad { l := fresh(95, 10); l.Updated = t0.Add(-181 * time.Second); return l }(), Unknown, nil, "expired"},
		{"invalid values", p, func() *NodeLoad { l := fresh(95, 10); l.Invalid = true; return l }(), Unknown, nil, "invalid"},
		{"memory not served", p, func() *NodeLoad { l := fresh(95, 10); l.HasMemory = false; return l }(), Unknown, nil, "missing memory"},
		{"memory not served, cpu-only policy", cpuOnly, func() *NodeLoad { l := fresh(95, 10); l.HasMemory = false; return l }(), Hot, []Resource{CPU}, ""},
		{"hot on cpu", p, fresh(81, 10), Hot, []Resource{CPU}, ""},
		{"hot on memory", p, fresh(10, 90), Hot, []Resource{Memory}, ""},
		{"hot on both", p, fresh(90, 90), Hot, []Resource{CPU, Memory}, ""},
		{"at the high threshold is not hot", p, fresh(80, 10), Normal, nil, ""},
		{"cold needs all resources low", p, fresh(10, 29.9), Cold, nil, ""},
		{"one resource at low is not cold", p, fresh(10, 30), Normal, nil, ""},
		{"cold on cpu, memory ignored by policy", cpuOnly, fresh(10, 70), Cold, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, why, over := tc.p.Classify(tc.l, t0)
			if c != tc.want || fmt.Sprint(over) != fmt.Sprint(tc.over) || !strings.HasPrefix(why, tc.why) {
				t.Fatalf("got %s %q %v, want %s %q %v", c, why, over, tc.want, tc.why, tc.over)
			}
		})
	}
}

func TestAnomalyRounds(t *testing.T) {
	var a Anomalies
	rounds := []struct {
		classes map[string]Class
		want    map[string]int
	}{
		{map[string]Class{"a": Hot, "b": Hot, "c": Cold}, map[string]int{"a": 1, "b": 1}},
		{map[string]Class{"a": Hot, "b": Normal, "c": Cold}, map[string]int{"a": 2}},
		{map[string]Class{"a": Hot, "b": Hot, "c": Cold}, map[string]int{"a": 3, "b": 1}},
		// Unknown is no evidence of heat: the count starts again.
		{map[string]Class{"a": Unknown, "b": Hot}, map[string]int{"b": 2}},
		{map[string]Class{"a": Hot, "b": Hot}, map[string]int{"a": 1, "b": 3}},
		// A node that leaves the pool is forgotten.
		{map[string]Class{"a": Hot}, map[string]int{"a": 2}},
		{map[string]Class{"a": Hot, "b": Hot}, map[string]int{"a": 3, "b": 1}},
		// A failed fetch forgets everything.
		{nil, map[string]int{}},
	}
	for i, r := range rounds {
		got := a.Observe(r.classes)
		if fmt.Sprint(got) != fmt.Sprint(r.want) {
			t.Fatalf("round %d: got %v, want %v", i+1, got, r.want)
		}
	}
}

type podOpt func(*corev1.Pod)

func node(name string, cpu, mem string, mut ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}}}
	for _, m := range mut {
		m(n)
	}
	return n
}

func pod(ns, name, nodeName, cpu, mem string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs-" + name, UID: types.UID("rs-" + name), Controller: new(bool)}}},
		Spec: corev1.PodSpec{SchedulerName: "berth-scheduler", NodeName: nodeName, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable},
	}
	*p.OwnerReferences[0].Controller = true
	for _, o := range opts {
		o(p)
	}
	return p
}

func owner(kind, name string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = kind, name, types.UID(name)
	}
}
func priority(v int32) podOpt         { return func(p *corev1.Pod) { p.Spec.Priority = &v } }
func qos(c corev1.PodQOSClass) podOpt { return func(p *corev1.Pod) { p.Status.QOSClass = c } }
func annotate(k, v string) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} }
}
func volume(v corev1.VolumeSource) podOpt {
	return func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: v}} }
}
func scheduler(name string) podOpt { return func(p *corev1.Pod) { p.Spec.SchedulerName = name } }
func tolerate(key string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}
func created(at time.Time) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(at) }
}
func noController() podOpt { return func(p *corev1.Pod) { p.OwnerReferences = nil } }
func nodeSelector(k, v string) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{k: v} }
}
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func label(k, v string) podOpt        { return func(p *corev1.Pod) { p.Labels = map[string]string{k: v} } }
func deleting() podOpt {
	return func(p *corev1.Pod) { now := metav1.NewTime(t0); p.DeletionTimestamp = &now }
}

func TestIneligible(t *testing.T) {
	p := policy(t, func(s *berthv1alpha1.RebalancerSpec) {
		s.Victims.ExcludedNamespaces = []string{"payments"}
		s.Victims.MaxPriority = i32(1000)
	})
	allowAll := policy(t, func(s *berthv1alpha1.RebalancerSpec) { s.Victims.AllowLocalStorage, s.Victims.AllowPVC = true, true })
	for _, tc := range []struct {
		name string
		p    *Policy
		pod  *corev1.Pod
		want string
	}{
		{"movable", p, pod("app", "a", "n", "1", "1Gi"), ""},
		{"default scheduler", p, pod("app", "a", "n", "1", "1Gi", scheduler("default-scheduler")), SkipOtherScheduler},
		{"terminating", p, pod("app", "a", "n", "1", "1Gi", deleting()), SkipTerminating},
		{"pending", p, pod("app", "a", "n", "1", "1Gi", phase(corev1.PodPending)), SkipNotRunning},
		{"daemonset", p, pod("app", "a", "n", "1", "1Gi", owner("DaemonSet", "ds")), SkipDaemonSet},
		{"mirror", p, pod("app", "a", "n", "1", "1Gi", annotate("kubernetes.io/config.mirror", "x")), SkipMirror},
		{"static (node owner)", p, pod("app", "a", "n", "1", "1Gi", owner("Node", "n")), SkipMirror},
		{"no controller", p, pod("app", "a", "n", "1", "1Gi", noController()), SkipNoController},
		{"kube-system", p, pod("kube-system", "a", "n", "1", "1Gi"), SkipNamespace},
		{"release namespace", p, pod("berth-system", "a", "n", "1", "1Gi"), SkipNamespace},
		{"excluded namespace", p, pod("payments", "a", "n", "1", "1Gi"), SkipNamespace},
		{"priority above", p, pod("app", "a", "n", "1", "1Gi", priority(1001)), SkipPriority},
		{"priority at threshold", p, pod("app", "a", "n", "1", "1Gi", priority(1000)), ""},
		{"opted out", p, pod("app", "a", "n", "1", "1Gi", annotate(berthv1alpha1.RebalancerOptOutAnnotation, "false")), SkipOptOut},
		{"emptyDir", p, pod("app", "a", "n", "1", "1Gi", volume(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})), SkipLocalStorage},
		{"hostPath", p, pod("app", "a", "n", "1", "1Gi", volume(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}})), SkipLocalStorage},
		{"pvc", p, pod("app", "a", "n", "1", "1Gi", volume(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}})), SkipPVC},
		{"emptyDir allowed", allowAll, pod("app", "a", "n", "1", "1Gi", volume(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})), ""},
		{"pvc allowed", allowAll, pod("app", "a", "n", "1", "1Gi", volume(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}})), ""},
		{"configMap volume is fine", p, pod("app", "a", "n", "1", "1Gi", volume(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}})), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Ineligible(tc.pod); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	n := node("n", "10", "10Gi")
	measured := map[string]loadapi.PodUsage{
		"uid-big":   {UID: "uid-big", Latest: loadapi.Latest{CPU: 30, Memory: 1}},
		"uid-small": {UID: "uid-small", Latest: loadapi.Latest{CPU: 5, Memory: 20}},
	}
	pods := []*corev1.Pod{
		pod("a", "guaranteed-low-prio", "n", "1", "1Gi", priority(-5), qos(corev1.PodQOSGuaranteed)),
		pod("a", "big", "n", "100m", "100Mi"),
		pod("a", "small", "n", "4", "4Gi"), // requests large, measured small: measured wins
		pod("a", "besteffort", "n", "0", "0", qos(corev1.PodQOSBestEffort)),
		pod("a", "high-prio", "n", "9", "9Gi", priority(100), qos(corev1.PodQOSBestEffort)),
		pod("a", "requests-20", "n", "2", "1Gi"), // no measurement: 20 % from requests
	}
	var c []PodLoad
	for _, p := range pods {
		c = append(c, podLoad(p, n, measured))
	}
	Order(c, []Resource{CPU})
	var got []string
	for _, x := range c {
		got = append(got, x.pod.Name)
	}
	want := "guaranteed-low-prio besteffort big requests-20 small high-prio"
	if strings.Join(got, " ") != want {
		t.Fatalf("cpu order %v, want %s", got, want)
	}
	Order(c, []Resource{Memory})
	got = got[:0]
	for _, x := range c {
		got = append(got, x.pod.Name)
	}
	if want := "guaranteed-low-prio besteffort small requests-20 big high-prio"; strings.Join(got, " ") != want {
		t.Fatalf("memory order %v, want %s", got, want)
	}
	for _, x := range c {
		if x.pod.Name == "requests-20" && (x.Measured || x.Percent.CPU != 20 || x.MilliCPU != 2000) {
			t.Fatalf("requests fallback: %+v", x)
		}
		if x.pod.Name == "big" && (!x.Measured || x.MilliCPU != 3000) {
			t.Fatalf("measured percent without absolute: %+v (want 3000m from 30%% of 10 cpu)", x)
		}
	}
}
