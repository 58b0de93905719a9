package instanceisolation

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/classrule"
)

// withoutMarker is pod's required node affinity with every requirement on the autoscaler
// marker left out, and whether it had any: what the pod may use apart from isolation.
func withoutMarker(pod *v1.Pod) (nodeaffinity.RequiredNodeAffinity, bool) {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nodeaffinity.RequiredNodeAffinity{}, false
	}
	had := false
	p := pod.DeepCopy()
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		kept := terms[i].MatchExpressions[:0]
		for _, r := range terms[i].MatchExpressions {
			if r.Key == classmarker.Key {
				had = true
				continue
			}
			kept = append(kept, r)
		}
		terms[i].MatchExpressions = kept
	}
	return nodeaffinity.GetRequiredNodeAffinity(p), had
}

// noRoom explains, for a pod whose node affinity carries the autoscaler marker's terms
// (pkg/isolation/webhook, "The autoscaler's view"), that every node it could use apart from
// isolation is held by another instance class: by its pods (the index), or by its marker (a
// node an autoscaler made for that class, not yet holding its pod). "" when some node is free,
// when the pod has no marker terms, or when it has no such node at all.
//
// why: NodeAffinity runs before this plugin's Filter, so on a node marked for another class
// the pod's FailedScheduling event would only say "didn't match Pod's node affinity/selector";
// when the pool has no room left for the class, the event must say so and name the class. The
// decision is the same: each node named here is refused by NodeAffinity or by Filter.
// Called with ix.mu held for reading.
func (ix *Index) noRoom(nodes []fwk.NodeInfo, pod *v1.Pod, pc *classrule.PodClass, strict, spread bool) string {
	mine := pc.Class()
	if mine == "" {
		return ""
	}
	affinity, had := withoutMarker(pod)
	if !had {
		return ""
	}
	own := classmarker.MarkerValue(mine)
	var held []string
	n := 0
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		if ok, err := affinity.Match(node); err != nil || !ok {
			continue
		}
		why := ""
		if np := len(ni.GetPods()); np > 0 {
			if c := ix.nodes[node.Name]; c != nil && c.Pods() == np && classrule.Verdict(classrule.View{Base: c}, pc, strict, spread) != "" {
				if why = (classrule.View{Base: c}).OtherClass(mine); why == "" {
					// why: refused for another reason (strict, spreadReplicas): not held by a class.
					return ""
				}
			}
		}
		if why == "" {
			if v, ok := node.Labels[classmarker.Key]; ok && v != own {
				why = "marked " + v
			}
		}
		if why == "" {
			return ""
		}
		n++
		if len(held) < 3 {
			held = append(held, node.Name+" "+why)
		}
	}
	if n == 0 {
		return ""
	}
	more := ""
	if n > len(held) {
		more = fmt.Sprintf(", and %d more", n-len(held))
	}
	return fmt.Sprintf("no node of the pool can take instance class %s: all %d node(s) the pod's node affinity allows hold another instance class (%s%s); "+
		"the class needs a new node (an autoscaler makes one for the pod's %s=%s term)", mine, n, strings.Join(held, ", "), more, classmarker.Key, own)
}
