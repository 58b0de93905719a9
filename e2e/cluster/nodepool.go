package cluster

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// AutoscaledPoolLabel marks the nodes of the plain (non-isolated) autoscaled pool
// AutoscaledNodePool makes: pods opt in by selecting it (and tolerating its taint).
const AutoscaledPoolLabel = "berth.dev/autoscaled-pool"

// NodePoolSpec is what the harness sets in a Karpenter NodePool (karpenter.sh/v1).
type NodePoolSpec struct {
	Name string
	// NodeClass is the KWOKNodeClass the pool's NodeClaims use (default DefaultKWOKNodeClass).
	NodeClass string
	// Labels and Taints are put on every node of the pool (template.metadata.labels,
	// template.spec.taints).
	Labels map[string]string
	Taints []corev1.Taint
	// Requirements narrow (In) or open (Exists) what a NodeClaim of the pool may carry. A key
	// outside Labels that a pod requires must be here, or Karpenter will not make a node for it.
	Requirements []corev1.NodeSelectorRequirement
	// ConsolidateAfter is how long a node stays empty before Karpenter removes it
	// (consolidationPolicy WhenEmpty). Zero: immediately.
	ConsolidateAfter time.Duration
	// CPULimit caps the pool's total CPU ("" none): a runaway test cannot make thousands of nodes.
	CPULimit string
}

// IsolationNodePool is the NodePool of an instance-isolation pool (marker-design.md): every node
// carries the pool's label and taint, and a NodeClaim may carry the autoscaler marker
// (classmarker.Key Exists), so Karpenter copies a classed pod's required marker value onto the
// NodeClaim it makes for it and never packs two classes onto one claim. WhenEmpty: only nodes
// without pods go.
func IsolationNodePool(name string, poolLabel corev1.NodeSelectorRequirement, poolTaint corev1.Taint, consolidateAfter time.Duration) NodePoolSpec {
	labels := map[string]string{}
	if len(poolLabel.Values) > 0 {
		labels[poolLabel.Key] = poolLabel.Values[0]
	}
	return NodePoolSpec{
		Name:   name,
		Labels: labels,
		Taints: []corev1.Taint{poolTaint},
		Requirements: []corev1.NodeSelectorRequirement{
			{Key: classmarker.Key, Operator: corev1.NodeSelectorOpExists},
		},
		ConsolidateAfter: consolidateAfter,
		CPULimit:         "1000",
	}
}

// AutoscaledNodePool is a plain autoscaled pool: its nodes carry AutoscaledPoolLabel=true and,
// if tainted, the taint AutoscaledPoolLabel=true:NoSchedule, so only pods that ask for the pool
// get its nodes.
func AutoscaledNodePool(name string, tainted bool, consolidateAfter time.Duration) NodePoolSpec {
	s := NodePoolSpec{
		Name:             name,
		Labels:           map[string]string{AutoscaledPoolLabel: "true"},
		ConsolidateAfter: consolidateAfter,
		CPULimit:         "1000",
	}
	if tainted {
		s.Taints = []corev1.Taint{{Key: AutoscaledPoolLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	return s
}

// NodePoolObject renders s as a karpenter.sh/v1 NodePool.
func NodePoolObject(s NodePoolSpec) *unstructured.Unstructured {
	class := s.NodeClass
	if class == "" {
		class = DefaultKWOKNodeClass
	}
	labels := map[string]any{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	var taints []any
	for _, t := range s.Taints {
		m := map[string]any{"key": t.Key, "effect": string(t.Effect)}
		if t.Value != "" {
			m["value"] = t.Value
		}
		taints = append(taints, m)
	}
	// The KWOK provider's instance types are linux/amd64 and arm64, on-demand and spot: pin the
	// cheapest-to-simulate, predictable ones (amd64, on-demand), as the provider's own example does.
	reqs := []any{
		map[string]any{"key": corev1.LabelArchStable, "operator": "In", "values": []any{"amd64"}},
		map[string]any{"key": corev1.LabelOSStable, "operator": "In", "values": []any{"linux"}},
		map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}},
	}
	for _, r := range s.Requirements {
		m := map[string]any{"key": r.Key, "operator": string(r.Operator)}
		if len(r.Values) > 0 {
			vals := make([]any, len(r.Values))
			for i, v := range r.Values {
				vals[i] = v
			}
			m["values"] = vals
		}
		reqs = append(reqs, m)
	}
	spec := map[string]any{
		"nodeClassRef": map[string]any{"group": KWOKNodeClassGVR.Group, "kind": "KWOKNodeClass", "name": class},
		"requirements": reqs,
		// Nodes of a test live minutes; the default 720h never matters, an explicit Never says so.
		"expireAfter": "Never",
	}
	if len(taints) > 0 {
		spec["taints"] = taints
	}
	tmpl := map[string]any{"spec": spec}
	if len(labels) > 0 {
		tmpl["metadata"] = map[string]any{"labels": labels}
	}
	obj := map[string]any{
		"template": tmpl,
		"disruption": map[string]any{
			"consolidationPolicy": "WhenEmpty",
			"consolidateAfter":    durationString(s.ConsolidateAfter),
			// why: Karpenter's default budget (nodes: 10%) removes one node of ten per disruption
			// loop, so ten empty nodes take minutes; a test waits consolidateAfter + one loop.
			"budgets": []any{map[string]any{"nodes": "100%"}},
		},
	}
	if s.CPULimit != "" {
		obj["limits"] = map[string]any{"cpu": s.CPULimit}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": obj}}
	u.SetAPIVersion(NodePoolGVR.GroupVersion().String())
	u.SetKind("NodePool")
	u.SetName(s.Name)
	return u
}

// durationString writes d as the NodePool's duration pattern wants it (^([0-9]+(s|m|h))+$).
func durationString(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(d/time.Second))
}
