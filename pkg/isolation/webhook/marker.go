package webhook

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// MarkerKey is the node label the operator's marker writer keeps equal to the effective class
// of the classed pods a pool node holds (classmarker.Key; README.md, "The autoscaler's view").
const MarkerKey = classmarker.Key

// markerValues are the marker values a pod of class value class in namespace ns may select:
// its class's value whether the class is its namespace's own or shared. Both are admitted
// because the other reading names no live class: while InstanceClass class lists ns, no pod has
// the owned class ns/class, and while none does (or it does not list ns, which the grant check
// refuses) no pod has the shared class. The chart's marker policy, which cannot read grants,
// admits the same two values.
func markerValues(ns, class string) []string {
	return []string{classmarker.MarkerValue(classmarker.NamespaceClass(ns, class)), classmarker.MarkerValue(classmarker.SharedClass(class))}
}

// markerTerms turns every required node selector term T of the pod (the pool requirement
// already ANDed in by nodeAffinity) into T AND marker In [value], and appends T AND marker
// DoesNotExist after all of them: Karpenter simulates the first term and relaxes to later ones
// only when it cannot be met, so a new NodeClaim always carries the class's marker, while the
// scheduler may still use an empty, unmarked pool node. A term that already names the marker
// (the webhook's own, on a second pass, or the pod's own value) is left alone: idempotent, add
// operations only.
func (m *mutation) markerTerms(pool corev1.NodeSelectorRequirement, value string) {
	in := corev1.NodeSelectorRequirement{Key: MarkerKey, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}
	none := corev1.NodeSelectorRequirement{Key: MarkerKey, Operator: corev1.NodeSelectorOpDoesNotExist}
	a := m.pod.Spec.Affinity
	var terms []corev1.NodeSelectorTerm
	if a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(terms) == 0 {
		// why: nodeAffinity wrote the whole required selector in one op; write it with both terms
		// instead (its op is the last one so far, and the only one on these paths).
		last := &m.res.Patch[len(m.res.Patch)-1]
		two := []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{pool, in}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{pool, none}},
		}
		switch v := last.Value.(type) {
		case map[string]any: // /spec/affinity or /spec/affinity/nodeAffinity
			if na, ok := v["nodeAffinity"].(map[string]any); ok {
				v = na
			}
			v["requiredDuringSchedulingIgnoredDuringExecution"] = corev1.NodeSelector{NodeSelectorTerms: two}
		case corev1.NodeSelector:
			last.Value = corev1.NodeSelector{NodeSelectorTerms: two}
		case []corev1.NodeSelectorTerm:
			last.Value = two
		case corev1.NodeSelectorTerm:
			last.Value = two[0]
			m.add(strings.TrimSuffix(last.Path, "/-")+"/-", two[1])
		}
		return
	}
	base := "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
	var copies []corev1.NodeSelectorTerm
	for i, t := range terms {
		if slices.ContainsFunc(t.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool { return r.Key == MarkerKey }) {
			continue
		}
		if t.MatchExpressions == nil && !hasRequirement(t.MatchExpressions, pool) {
			// why: nodeAffinity created this list with the pool requirement; extend that op.
			for j := range m.res.Patch {
				if p := &m.res.Patch[j]; p.Path == fmt.Sprintf("%s/%d/matchExpressions", base, i) {
					p.Value = append(p.Value.([]corev1.NodeSelectorRequirement), in)
				}
			}
		} else {
			m.add(fmt.Sprintf("%s/%d/matchExpressions/-", base, i), in)
		}
		c := *t.DeepCopy()
		if !hasRequirement(c.MatchExpressions, pool) {
			c.MatchExpressions = append(c.MatchExpressions, pool)
		}
		c.MatchExpressions = append(c.MatchExpressions, none)
		copies = append(copies, c)
	}
	for _, c := range copies {
		m.add(base+"/-", c)
	}
}

// markerSelection names the first field of spec that selects the marker in a way a pod of
// another class could use: for a pod with a class, any value but own's (In with another value,
// NotIn, Exists, Gt, Lt); for a pod without one (own nil), any selection at all. DoesNotExist
// never counts (it keeps off every class's node). "" when none. Order: nodeSelector, required
// terms, preferred terms (the chart's marker policy names the same field).
func markerSelection(spec *corev1.PodSpec, own []string) string {
	if v, ok := spec.NodeSelector[MarkerKey]; ok && !slices.Contains(own, v) {
		return fmt.Sprintf("%s: selects the isolation marker %s=%s", field.NewPath("spec", "nodeSelector").Key(MarkerKey), MarkerKey, v)
	}
	bad := func(r corev1.NodeSelectorRequirement) bool {
		if r.Key != MarkerKey || r.Operator == corev1.NodeSelectorOpDoesNotExist {
			return false
		}
		return r.Operator != corev1.NodeSelectorOpIn || len(r.Values) == 0 || slices.ContainsFunc(r.Values, func(v string) bool { return !slices.Contains(own, v) })
	}
	say := func(p *field.Path, r corev1.NodeSelectorRequirement) string {
		s := fmt.Sprintf("%s: selects the isolation marker %s %s", p, r.Key, r.Operator)
		if len(r.Values) > 0 {
			s += " [" + strings.Join(r.Values, ", ") + "]"
		}
		return s
	}
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return ""
	}
	na := field.NewPath("spec", "affinity", "nodeAffinity")
	if req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		for i, t := range req.NodeSelectorTerms {
			for j, r := range t.MatchExpressions {
				if bad(r) {
					return say(na.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms").Index(i).Child("matchExpressions").Index(j), r)
				}
			}
		}
	}
	for i, t := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		for j, r := range t.Preference.MatchExpressions {
			if bad(r) {
				return say(na.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i).Child("preference", "matchExpressions").Index(j), r)
			}
		}
	}
	return ""
}

// markerRefusal is the refusal of a pod selecting another class's marker (class "": a pod
// without a class selecting the marker at all).
func (c *Config) markerRefusal(sel, class string) *Refusal {
	if class == "" {
		return &Refusal{fmt.Sprintf("%s; only pods of an instance class (label %s) may select the marker %s, and only with their own class's value, which the isolation webhook writes itself",
			sel, strings.Join(c.ClassLabels, " or "), MarkerKey)}
	}
	return &Refusal{fmt.Sprintf("%s; a pod of instance class %s may select the marker %s only with its own class's value, which the isolation webhook writes itself",
		sel, class, MarkerKey)}
}
