package instanceisolation

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/classrule"
)

// EventsToRegister lists what can turn this plugin's refusal into a fit: a new node (empty,
// so no class holds it), a node relabelled or retainted (it may now be in the pod's pool), an
// assigned pod deleted or relabelled away from the conflicting class, and the pending pod's
// own labels changing.
func (pl *InstanceIsolation) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete | fwk.UpdatePodLabel}, QueueingHintFn: pl.isSchedulableAfterAssignedPodChange},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodLabel}, QueueingHintFn: pl.isSchedulableAfterTargetPodChange},
	}, nil
}

// isSchedulableAfterNodeChange queues the pod when the node is one this plugin would accept
// it on: a new node normally is (nothing is bound there yet); a relabelled one only if no
// conflicting pod holds it, since a label cannot change what runs there.
func (pl *InstanceIsolation) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	_, node, err := util.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	pc := pl.cls.Classify(pod)
	if pc.Conflict != "" || !pl.participates(&pc) {
		return fwk.QueueSkip, nil
	}
	if reason := pl.index.verdict(node.Name, nil, &pc, pl.strict, pl.spread); reason != "" {
		logger.V(5).Info("Node still conflicts with the pod's instance class", "pod", klog.KObj(pod), "node", klog.KObj(node), "reason", reason)
		return fwk.QueueSkip, nil
	}
	// why: a node an autoscaler made for another class carries that class's marker, which the
	// pod's marker terms refuse; retrying every waiting class on every class's new node costs
	// one scheduling attempt per class per node (bench-autoscale).
	if v, ok := node.Labels[classmarker.Key]; ok && hasMarkerTerms(pod) && v != classmarker.MarkerValue(pc.Class()) {
		logger.V(5).Info("Node is marked for another instance class", "pod", klog.KObj(pod), "node", klog.KObj(node), "marker", v)
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// hasMarkerTerms says whether pod's required node affinity names the autoscaler marker (the
// webhook's terms).
func hasMarkerTerms(pod *v1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range t.MatchExpressions {
			if r.Key == classmarker.Key {
				return true
			}
		}
	}
	return false
}

// blocks says whether an assigned pod, by itself, would make this plugin refuse pc on its
// node.
func (pl *InstanceIsolation) blocks(pc *classrule.PodClass, other *v1.Pod) bool {
	if other == nil {
		return false
	}
	opc := pl.cls.Classify(other)
	if opc.Exempt {
		return false
	}
	var c classrule.Counts
	c.Add(opc.Classes, opc.Owner, 1)
	return classrule.Verdict(classrule.View{Base: &c}, pc, pl.strict, pl.spread) != ""
}

// isSchedulableAfterAssignedPodChange queues the pod when a pod that conflicted with it left
// its node (deleted, or terminated: the scheduler's informer reports both as a delete) or was
// relabelled so it no longer conflicts.
func (pl *InstanceIsolation) isSchedulableAfterAssignedPodChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPod, newPod, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	pc := pl.cls.Classify(pod)
	if pc.Conflict != "" || !pl.participates(&pc) {
		return fwk.QueueSkip, nil
	}
	if pl.blocks(&pc, oldPod) && !pl.blocks(&pc, newPod) {
		logger.V(5).Info("A pod conflicting with the pod's instance class left its node or changed class", "pod", klog.KObj(pod), "other", klog.KObj(oldPod))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterTargetPodChange queues the pod when its own class (or exemption) changed.
func (pl *InstanceIsolation) isSchedulableAfterTargetPodChange(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPod, newPod, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	o, n := pl.cls.Classify(oldPod), pl.cls.Classify(newPod)
	if o.Exempt == n.Exempt && o.Conflict == n.Conflict && equalStrings(o.Classes, n.Classes) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
