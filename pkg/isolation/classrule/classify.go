// Package classrule is InstanceIsolation's rule without the scheduler framework: what a pod's
// instance class is, what a node holds, and whether a pod may join it. The scheduler plugin
// (pkg/scheduler/plugins/instanceisolation) keeps an index of these counts; the operator's
// rebalancer asks the same question of one node's pods (Classifier.Verdict).
package classrule

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	configv1 "github.com/berth-sched/berth/api/config/v1"
)

// PluginName is the scheduler plugin applying the rule: its name in a profile's plugins and
// pluginConfig (the row of pkg/scheduler/apis/config's table).
const PluginName = "InstanceIsolation"

// MirrorPodAnnotation marks a static pod's mirror (kubelet's kubetypes.ConfigMirrorAnnotationKey).
const MirrorPodAnnotation = "kubernetes.io/config.mirror"

// Args configures the rule (defaults in api/config/v1, validation in pkg/scheduler/apis/config).
type Args = configv1.InstanceIsolationArgs

// PodClass is what the rule needs to know about a pod.
type PodClass struct {
	// Exempt pods neither count on a node nor are filtered.
	Exempt bool
	// Classes are the effective classes (Grants.Effective: "<namespace>/<value>" or "<value>
	// (shared)") of the distinct non-empty values of the pod's class labels, sorted. Empty:
	// the pod has no class. More than one: Conflict says why the pod is refused; placed
	// elsewhere (by another scheduler) it counts under each of them, which keeps every other
	// class off its node. Computed once per pod, so a verdict compares keys only.
	Classes  []string
	Conflict string
	// NS and Values (the raw label values, in the labels' order) let an index re-key the pod
	// when an InstanceClass changes.
	NS     string
	Values []string
	// Owner is the UID of the controller owner reference (spreadReplicas), OwnerRef its
	// Kind/name for messages.
	Owner    types.UID
	OwnerRef string
}

// Class is the pod's (first) effective class, "" without one.
func (pc *PodClass) Class() string {
	if len(pc.Classes) == 0 {
		return ""
	}
	return pc.Classes[0]
}

// Participates says whether the rule has anything to check for pc: an exempt pod, and an
// unclassed one outside strict mode, fit every node.
func (pc *PodClass) Participates(strict bool) bool {
	return !pc.Exempt && (len(pc.Classes) > 0 || strict)
}

// Classifier turns pods into PodClass under one profile's args.
type Classifier struct {
	keys     []string
	exemptNS map[string]bool
	exemptLS labels.Selector
	grants   *Grants
}

// NewClassifier classifies by validated args (pkg/scheduler/apis/config's Parse) and grants
// (nil: none, every class is its pods' namespace's).
func NewClassifier(a *Args, g *Grants) *Classifier {
	c := &Classifier{keys: a.ClassLabels, exemptNS: map[string]bool{}, exemptLS: exemptSelector(a), grants: g}
	for _, ns := range a.ExemptNamespaces {
		c.exemptNS[ns] = true
	}
	return c
}

// Grants are the grants the classifier reads (nil: none).
func (c *Classifier) Grants() *Grants { return c.grants }

// exemptSelector is the compiled ExemptSelector of validated args; nil when unset. An empty
// selector ({}) matches every pod, as everywhere in Kubernetes.
func exemptSelector(a *Args) labels.Selector {
	if a.ExemptSelector == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(a.ExemptSelector)
	if err != nil {
		// why: validation already compiled it; a selector that no longer does exempts nobody,
		// which only keeps more pods apart.
		return labels.Nothing()
	}
	return s
}

func (c *Classifier) isExempt(pod *v1.Pod) bool {
	if _, ok := pod.Annotations[MirrorPodAnnotation]; ok {
		return true
	}
	for _, o := range pod.OwnerReferences {
		// why: any DaemonSet reference, controller or not, as IPP does: node daemons run on
		// every node whatever its class.
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	if c.exemptNS[pod.Namespace] {
		return true
	}
	return c.exemptLS != nil && c.exemptLS.Matches(labels.Set(pod.Labels))
}

// Classify is pod's class under the classifier's args and grants.
func (c *Classifier) Classify(pod *v1.Pod) PodClass {
	if c.isExempt(pod) {
		return PodClass{Exempt: true}
	}
	var pc PodClass
	var found []string
	for _, k := range c.keys {
		v, ok := pod.Labels[k]
		// why: IPP leaves a pod with an empty ipp-class alone; an empty value is no class.
		if !ok || v == "" {
			continue
		}
		found = append(found, k+"="+v)
		dup := false
		for _, have := range pc.Values {
			dup = dup || have == v
		}
		if !dup {
			pc.Values = append(pc.Values, v)
		}
	}
	if len(pc.Values) > 0 {
		pc.NS = pod.Namespace
		pc.Classes = c.Effective(pod.Namespace, pc.Values)
	}
	if len(pc.Classes) > 1 {
		pc.Conflict = "pod carries conflicting instance classes: " + strings.Join(found, ", ")
		sort.Strings(pc.Classes)
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		pc.Owner = ref.UID
		pc.OwnerRef = ref.Kind + "/" + ref.Name
	}
	return pc
}

// Effective maps raw class values of a pod of namespace ns to their effective classes, sorted.
func (c *Classifier) Effective(ns string, values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = c.grants.Effective(ns, v)
	}
	if len(out) > 1 {
		sort.Strings(out)
	}
	return out
}

// Verdict is the plugin's decision for pod on a node holding nodePods when its index knows
// nothing of the node (its Filter's own fallback): PreFilter's refusal of a pod with
// conflicting classes, then the rule over the classes of nodePods. reason says why refuse.
//
// why: the operator's rebalancer predicts whether an evicted pod may land on a node without
// linking the scheduler's plugins. The plugin's PreFilter may also refuse a marker-pinned pod
// whose node affinity does not match the node (noroom.go): NodeAffinity refuses it first.
func (c *Classifier) Verdict(pod *v1.Pod, nodePods []*v1.Pod, strict, spread bool) (reason string, refuse bool) {
	pc := c.Classify(pod)
	if pc.Conflict != "" {
		return pc.Conflict, true
	}
	if !pc.Participates(strict) || len(nodePods) == 0 {
		return "", false
	}
	var n Counts
	for _, p := range nodePods {
		opc := c.Classify(p)
		n.AddPod(&opc, 1)
	}
	reason = Verdict(View{Base: &n}, &pc, strict, spread)
	return reason, reason != ""
}
