package webhook

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// PatchOp is one RFC 6902 operation. The webhook only ever emits "add": onto a missing field,
// or appending ("/-") to a list the pod already has, so nothing the pod carries is replaced.
// The one exception is spec.schedulerName, which is replaced only when it is empty or the
// default scheduler (an add on an existing member replaces it, per RFC 6902).
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// Refusal is a pod the webhook will not admit, with the reason shown to the user.
type Refusal struct{ Message string }

func (r *Refusal) Error() string { return r.Message }

// Result is what the webhook answers for one pod.
type Result struct {
	// Class is the pod's instance class ("" when it has none, or in an exempt namespace).
	Class string
	// Exempt names why a pod is left alone (exempt namespace, mirror pod).
	Exempt string
	Patch  []PatchOp
	// Warnings are shown to the client (kubectl prints them).
	Warnings []string
}

// ClassOf returns the label key and value of pod's instance class: the first of keys the pod
// carries with a non-empty value. Two keys with different values, or a value that is not a
// valid label value, are refused (the API server would refuse the latter anyway, but only
// after this webhook ran, and the term written from it would be invalid too).
func ClassOf(labels map[string]string, keys []string) (key, class string, err error) {
	var found []string
	for _, k := range keys {
		v, ok := labels[k]
		if !ok || v == "" {
			continue
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return "", "", &Refusal{fmt.Sprintf("instance class %s=%q is not a valid label value: %s", k, v, strings.Join(msgs, "; "))}
		}
		if key == "" {
			key, class = k, v
		} else if v != class {
			found = append(found, k+"="+v)
		}
	}
	if len(found) > 0 {
		return "", "", &Refusal{fmt.Sprintf("pod carries conflicting instance classes: %s=%s, %s (use one class label)",
			key, class, strings.Join(found, ", "))}
	}
	return key, class, nil
}

// Mutate computes the patch for pod under c, or refuses it. It never modifies pod.
//
// Pods in an exempt namespace and mirror pods are left alone. Everywhere else the pool belongs
// to the classes: an unclassed pod that tolerates the pool taint or selects the pool's nodes
// is refused (it would run beside a class on its node), and so is a classed DaemonSet pod
// (README.md, "DaemonSet pods"). Classed pods get the mode's constraint.
func (c *Config) Mutate(pod *corev1.Pod) (Result, error) {
	if slices.Contains(c.ExemptNamespaces, pod.Namespace) {
		return Result{Exempt: "namespace " + pod.Namespace + " is exempt"}, nil
	}
	key, class, err := ClassOf(pod.Labels, c.ClassLabels)
	if err != nil {
		return Result{}, err
	}
	if _, ok := pod.Annotations[MirrorPodAnnotation]; ok {
		// why: the kubelet runs static pods from its own files whatever the API server says; the
		// API object only mirrors them (refusing it would hide the pod, not stop it), and a
		// mirror annotation written by anyone else gives no way in: the kubelet deletes a mirror
		// pod with no static pod behind it and never runs it.
		return Result{Class: class, Exempt: "mirror pod"}, nil
	}
	if class == "" {
		if access := c.poolAccess(&pod.Spec); len(access) > 0 {
			return Result{}, c.unclassedRefusal(access)
		}
		if c.AutoscalerMarker {
			if sel := markerSelection(&pod.Spec, nil); sel != "" {
				return Result{}, c.markerRefusal(sel, "")
			}
		}
		return Result{}, c.nodeNameRefusal(pod)
	}
	if i := daemonSetOwner(pod); i >= 0 {
		return Result{}, c.daemonSetRefusal(pod, i, class)
	}
	if pod.Spec.NodeName != "" {
		// why: a pod created with spec.nodeName is never scheduled, so neither InstanceIsolation
		// nor the anti-affinity term is evaluated, and the kubelet checks neither: it would run
		// beside any class. The API server would accept it; only this refusal keeps it out.
		return Result{}, &Refusal{fmt.Sprintf("pod of instance class %s sets spec.nodeName %q, which bypasses the scheduler and with it isolation; "+
			"to pin it, require the node with node affinity on %s instead", class, pod.Spec.NodeName, corev1.LabelHostname)}
	}
	owners, shared, err := c.owners(pod, key, class)
	if err != nil {
		return Result{}, err
	}
	if c.AutoscalerMarker {
		// why: a pod requiring another class's marker would make an autoscaler put it on (or
		// create for it) a node of that class; InstanceIsolation would still refuse the node,
		// but the autoscaler would then believe the pod fits there and make no node of its own.
		if sel := markerSelection(&pod.Spec, markerValues(pod.Namespace, class)); sel != "" {
			return Result{}, c.markerRefusal(sel, class)
		}
	}
	m := &mutation{pod: pod, res: Result{Class: class}}
	m.toleration(corev1.Toleration{Key: c.TaintKey, Operator: corev1.TolerationOpEqual, Value: c.TaintValue, Effect: c.TaintEffect})
	pool := corev1.NodeSelectorRequirement{Key: c.PoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{c.PoolValue}}
	m.nodeAffinity(pool)
	if c.AutoscalerMarker {
		m.markerTerms(pool, classmarker.MarkerValue(classmarker.Effective(pod.Namespace, class, shared)))
	}
	if c.Mode == ModeIPP || c.Mode == ModeBoth {
		for _, t := range c.ClassTerms(class, owners) {
			m.antiAffinity(t)
		}
		if c.SpreadReplicas {
			m.spread()
		}
	}
	if c.Mode == ModeBerth || c.Mode == ModeBoth {
		m.scheduler(c)
	}
	return m.res, nil
}

// ClassTerm is IPP's anti-affinity term made cluster-wide: no pod of another class under key
// on the same node, in any namespace. Exists is what makes cluster-wide workable: IPP's bare
// `NotIn [class]` also matches every pod WITHOUT the label, which its namespace-scoped term
// only met in the pod's own namespace; across namespaces it would match the node daemons
// (kube-proxy, CNI, Berth's agent) on every node and no classed pod would ever schedule. The
// pool taint, not the term, keeps unclassed pods off a class's nodes.
func ClassTerm(key, class string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: key, Operator: metav1.LabelSelectorOpExists},
			{Key: key, Operator: metav1.LabelSelectorOpNotIn, Values: []string{class}},
		}},
		NamespaceSelector: &metav1.LabelSelector{},
		TopologyKey:       corev1.LabelHostname,
	}
}

// ClassTerms is, per class label key, a ClassTerm and an OwnerTerm for owners (the namespaces
// sharing the class: the pod's own, or an InstanceClass's list): a pod of another effective
// class labelled under any of the keys must be matched, and one selector cannot OR across keys
// (nor across namespaces: another value anywhere, or this value outside owners).
func (c *Config) ClassTerms(class string, owners []string) []corev1.PodAffinityTerm {
	out := make([]corev1.PodAffinityTerm, 0, 2*len(c.ClassLabels))
	for _, k := range c.ClassLabels {
		out = append(out, ClassTerm(k, class), OwnerTerm(k, class, owners))
	}
	return out
}

// SpreadTerm keeps pods of one controller on different nodes (they share its namespace).
func SpreadTerm(controllerUID string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: SpreadLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{controllerUID},
		}}},
		TopologyKey: corev1.LabelHostname,
	}
}

type mutation struct {
	pod *corev1.Pod
	res Result
	// ours are the pod-affinity terms this webhook wrote or found already written.
	ours []corev1.PodAffinityTerm
	// label and terms added so far, so later steps see the patched shape.
	addedAnti    []corev1.PodAffinityTerm
	affinityMade bool
	antiMade     bool
	labelsMade   bool
}

func (m *mutation) add(path string, v any) {
	m.res.Patch = append(m.res.Patch, PatchOp{Op: "add", Path: path, Value: v})
}

func (m *mutation) warn(format string, a ...any) {
	m.res.Warnings = append(m.res.Warnings, "instance isolation: "+fmt.Sprintf(format, a...))
}

func (m *mutation) toleration(t corev1.Toleration) {
	for _, have := range m.pod.Spec.Tolerations {
		op := have.Operator
		if op == "" {
			op = corev1.TolerationOpEqual
		}
		if have.Key == t.Key && op == t.Operator && have.Value == t.Value && have.Effect == t.Effect && have.TolerationSeconds == nil {
			return
		}
	}
	if m.pod.Spec.Tolerations == nil {
		m.add("/spec/tolerations", []corev1.Toleration{t})
		return
	}
	m.add("/spec/tolerations/-", t)
}

// nodeAffinity ANDs req into every required node selector term (terms are ORed, so adding it
// to each keeps every alternative the pod allowed, now restricted to the pool).
func (m *mutation) nodeAffinity(req corev1.NodeSelectorRequirement) {
	a := m.pod.Spec.Affinity
	switch {
	case a == nil:
		m.affinityMade = true
		m.add("/spec/affinity", map[string]any{"nodeAffinity": requiredNode(req)})
		return
	case a.NodeAffinity == nil:
		m.add("/spec/affinity/nodeAffinity", requiredNode(req))
		return
	case a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil:
		m.add("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", requiredNode(req)["requiredDuringSchedulingIgnoredDuringExecution"])
		return
	}
	base := "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		// why: an empty term list matches no node; the API server refuses it, so add the one
		// term the pod needs rather than leave it unschedulable.
		if terms == nil {
			m.add(base, []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}})
		} else {
			m.add(base+"/-", corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}})
		}
		return
	}
	for i, t := range terms {
		if hasRequirement(t.MatchExpressions, req) {
			continue
		}
		if t.MatchExpressions == nil {
			m.add(fmt.Sprintf("%s/%d/matchExpressions", base, i), []corev1.NodeSelectorRequirement{req})
		} else {
			m.add(fmt.Sprintf("%s/%d/matchExpressions/-", base, i), req)
		}
	}
}

func requiredNode(req corev1.NodeSelectorRequirement) map[string]any {
	return map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
	}}
}

func hasRequirement(have []corev1.NodeSelectorRequirement, want corev1.NodeSelectorRequirement) bool {
	for _, h := range have {
		if h.Key == want.Key && h.Operator == want.Operator && reflect.DeepEqual(h.Values, want.Values) {
			return true
		}
	}
	return false
}

// antiAffinity appends term to the pod's required anti-affinity unless an equal term is there.
func (m *mutation) antiAffinity(term corev1.PodAffinityTerm) {
	m.ours = append(m.ours, term)
	a := m.pod.Spec.Affinity
	var have []corev1.PodAffinityTerm
	if a != nil && a.PodAntiAffinity != nil {
		have = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	for _, h := range append(append([]corev1.PodAffinityTerm(nil), have...), m.addedAnti...) {
		if equalTerm(h, term) {
			return
		}
	}
	defer func() { m.addedAnti = append(m.addedAnti, term) }()
	switch {
	case m.affinityMade:
		// why: /spec/affinity was created by this patch; a second op fills in its sibling.
		if !m.antiMade {
			m.antiMade = true
			m.add("/spec/affinity/podAntiAffinity", map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []corev1.PodAffinityTerm{term}})
			return
		}
		m.add("/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/-", term)
	case a.PodAntiAffinity == nil && !m.antiMade:
		m.antiMade = true
		m.add("/spec/affinity/podAntiAffinity", map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []corev1.PodAffinityTerm{term}})
	case !m.antiMade && a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil:
		m.antiMade = true
		m.add("/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution", []corev1.PodAffinityTerm{term})
	default:
		m.add("/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/-", term)
	}
}

func equalTerm(a, b corev1.PodAffinityTerm) bool {
	norm := func(t corev1.PodAffinityTerm) corev1.PodAffinityTerm {
		if t.LabelSelector != nil && len(t.LabelSelector.MatchLabels) == 0 {
			t.LabelSelector = t.LabelSelector.DeepCopy()
			t.LabelSelector.MatchLabels = nil
		}
		if t.NamespaceSelector != nil && len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
			t.NamespaceSelector = &metav1.LabelSelector{}
		}
		if len(t.Namespaces) == 0 {
			t.Namespaces = nil
		}
		return t
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// spread labels the pod with its controller's UID and keeps the controller's pods apart.
func (m *mutation) spread() {
	ref := metav1.GetControllerOf(m.pod)
	if ref == nil || ref.UID == "" {
		return
	}
	uid := string(ref.UID)
	if have, ok := m.pod.Labels[SpreadLabel]; ok && have != uid {
		m.warn("label %s=%q kept (it is not the UID of the pod's controller %s %s): its replicas are not spread", SpreadLabel, have, ref.Kind, ref.Name)
		return
	} else if !ok {
		if m.pod.Labels == nil && !m.labelsMade {
			m.labelsMade = true
			m.add("/metadata/labels", map[string]string{SpreadLabel: uid})
		} else {
			m.add("/metadata/labels/"+escape(SpreadLabel), uid)
		}
	}
	m.antiAffinity(SpreadTerm(uid))
}

// scheduler sends the pod to Berth unless it chose another scheduler itself.
func (m *mutation) scheduler(c *Config) {
	want := c.SchedulerName
	if c.Mode == ModeBoth && c.IsolatedSchedulerName != "" && m.onlyOurPodAffinity() {
		want = c.IsolatedSchedulerName
	}
	switch have := m.pod.Spec.SchedulerName; have {
	case "", defaultScheduler:
		m.add("/spec/schedulerName", want)
	case want:
	case c.SchedulerName:
	case c.IsolatedSchedulerName:
		if !m.onlyOurPodAffinity() {
			m.warn("spec.schedulerName %q kept, but that profile does not evaluate pod (anti-)affinity and this pod has terms of its own: they are ignored (use %q)", have, c.SchedulerName)
		}
	default:
		m.warn("spec.schedulerName %q kept: InstanceIsolation (%s) does not schedule this pod, so the isolation policy refuses it", have, c.SchedulerName)
	}
}

// onlyOurPodAffinity: the pod's pod-affinity terms, after this patch, are all the webhook's.
func (m *mutation) onlyOurPodAffinity() bool {
	a := m.pod.Spec.Affinity
	if a == nil {
		return true
	}
	if a.PodAffinity != nil && (len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 || len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0) {
		return false
	}
	if a.PodAntiAffinity == nil {
		return true
	}
	if len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		return false
	}
next:
	for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		for _, o := range m.ours {
			if equalTerm(t, o) {
				continue next
			}
		}
		return false
	}
	return true
}

// escape makes a map key a JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
