package webhook

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The chart's ValidatingAdmissionPolicies say the same as the refusals below, word for word
// (e2e/chart's TestIsolationPolicyAgreesWithWebhook compares them on the same pods), so a user
// reads one message whether the webhook or the policy stopped the pod.

// mayTolerate: t tolerates the pool taint, or may. Lt/Gt tolerations on the pool's key count
// as tolerating: whether they match depends on a feature gate and on the taint value being a
// number, and a pod that only might reach the pool is still a pod that asked to.
func (c *Config) mayTolerate(t corev1.Toleration) bool {
	if t.Key != "" && t.Key != c.TaintKey {
		return false
	}
	if t.Effect != "" && t.Effect != c.TaintEffect {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpExists, corev1.TolerationOpGt, corev1.TolerationOpLt:
		return true
	case "", corev1.TolerationOpEqual:
		return t.Value == c.TaintValue
	}
	// why: any other operator is refused by the API server's validation after this webhook.
	return false
}

// selectsPool: the node selector requirement r is satisfied by a pool node (label
// PoolLabel=PoolValue). Only requirements that rule the pool out (DoesNotExist, In without the
// pool's value, NotIn with it) do not count; Gt/Lt count, as for tolerations.
func (c *Config) selectsPool(r corev1.NodeSelectorRequirement) bool {
	if r.Key != c.PoolLabel {
		return false
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return slices.Contains(r.Values, c.PoolValue)
	case corev1.NodeSelectorOpNotIn:
		return !slices.Contains(r.Values, c.PoolValue)
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		return true
	}
	return false
}

// poolAccess names the first toleration of the pool taint and the first node selection of the
// pool's nodes that spec carries, each as "<field path>: <what it does>"; nil when neither.
// Preferred node affinity is not a way in: without the toleration the taint keeps the pod
// off, and with it the toleration is named.
func (c *Config) poolAccess(spec *corev1.PodSpec) []string {
	var out []string
	for i, t := range spec.Tolerations {
		if c.mayTolerate(t) {
			out = append(out, fmt.Sprintf("%s: tolerates the isolation pool taint %s",
				field.NewPath("spec", "tolerations").Index(i), c.taintString()))
			break
		}
	}
	selects := func(p *field.Path) string {
		return fmt.Sprintf("%s: selects the isolation pool's nodes %s=%s", p, c.PoolLabel, c.PoolValue)
	}
	if v, ok := spec.NodeSelector[c.PoolLabel]; ok && v == c.PoolValue {
		return append(out, selects(field.NewPath("spec", "nodeSelector").Key(c.PoolLabel)))
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := field.NewPath("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
		for i, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for j, r := range term.MatchExpressions {
				if c.selectsPool(r) {
					return append(out, selects(terms.Index(i).Child("matchExpressions").Index(j)))
				}
			}
		}
	}
	return out
}

func (c *Config) taintString() string {
	return fmt.Sprintf("%s=%s:%s", c.TaintKey, c.TaintValue, c.TaintEffect)
}

func (c *Config) exemptList() string {
	if len(c.ExemptNamespaces) == 0 {
		return "none"
	}
	return strings.Join(c.ExemptNamespaces, ", ")
}

// unclassedRefusal is the refusal of an unclassed pod that reaches for the pool.
func (c *Config) unclassedRefusal(access []string) *Refusal {
	return &Refusal{fmt.Sprintf("%s; only pods of an instance class (label %s) or in an exempt namespace (%s) may tolerate the pool taint or select the pool's nodes, which belong to instance classes",
		strings.Join(access, "; "), strings.Join(c.ClassLabels, " or "), c.exemptList())}
}

// daemonSetOwner is the index of pod's first owner reference of kind DaemonSet, or -1. Any
// apiVersion: an owner reference is written by whoever creates the pod, so the kind alone must
// not be a way around the rule it triggers.
func daemonSetOwner(pod *corev1.Pod) int {
	return slices.IndexFunc(pod.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
}

// daemonSetRefusal is the refusal of a classed DaemonSet pod. Why refuse rather than confine:
// see README.md, "DaemonSet pods".
func (c *Config) daemonSetRefusal(pod *corev1.Pod, i int, class string) *Refusal {
	return &Refusal{fmt.Sprintf("%s: pod of instance class %s is owned by DaemonSet %s; only pods in an exempt namespace (%s) may be DaemonSet pods of an instance class, "+
		"since a DaemonSet puts a pod on every node it selects, beside whatever class runs there: run the class's workload as a Deployment or StatefulSet, or remove the class label from the DaemonSet's pod template",
		field.NewPath("metadata", "ownerReferences").Index(i), class, pod.OwnerReferences[i].Name, c.exemptList())}
}
