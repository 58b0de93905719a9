// Package workloadprofile learns, per workload, what its pods really use from the measured use
// of their siblings, so a new replica can be estimated from what the replicas already running
// use rather than from its spec. Pure logic: the caller feeds it samples (the scheduler's
// load-aware engine, from the load watcher's per-pod usage) and reads the profiles it publishes.
package workloadprofile

import (
	v1 "k8s.io/api/core/v1"
)

// Revision labels: a controller stamps its pods with a hash of their template, so a rollout to
// new requests (or a new image that uses more) starts a profile of its own instead of inheriting
// the old template's.
const (
	PodTemplateHashLabel        = "pod-template-hash"        // ReplicaSet (Deployment)
	ControllerRevisionHashLabel = "controller-revision-hash" // StatefulSet, DaemonSet
)

// Key names one workload: the pod's own namespace, its controlling owner's UID and its
// template revision. Why the pod's namespace and the controller's UID, never the owner's name
// or kind: a pod's creator writes its owner references, so a forged reference can name any
// UID, but only within the pod's namespace — it can at worst join a profile of its own
// namespace, never lower another namespace's.
type Key struct {
	Namespace string `json:"namespace"`
	OwnerUID  string `json:"ownerUID"`
	Revision  string `json:"revision,omitempty"`
}

// String is the key as the decision record prints it.
func (k Key) String() string {
	s := k.Namespace + "/" + k.OwnerUID
	if k.Revision != "" {
		s += "@" + k.Revision
	}
	return s
}

// KeyOf is pod's workload key; false for a pod without a controlling owner (a bare pod, or one
// whose owner references name no controller), which has no siblings to learn from. It reads
// the pod's fields only and does not allocate.
func KeyOf(pod *v1.Pod) (Key, bool) {
	if pod == nil {
		return Key{}, false
	}
	for i := range pod.OwnerReferences {
		ref := &pod.OwnerReferences[i]
		if ref.Controller == nil || !*ref.Controller || ref.UID == "" {
			continue
		}
		rev := pod.Labels[PodTemplateHashLabel]
		if rev == "" {
			rev = pod.Labels[ControllerRevisionHashLabel]
		}
		return Key{Namespace: pod.Namespace, OwnerUID: string(ref.UID), Revision: rev}, true
	}
	return Key{}, false
}
