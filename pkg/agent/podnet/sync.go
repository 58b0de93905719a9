package podnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// Sync reconciles this node's entries of the PodConfig key (namespace/name) and applies their
// status if it changed. It returns a delay after which to look again (0: only on events).
func (e *Executor) Sync(ctx context.Context, key string) (time.Duration, error) {
	obj, exists, err := e.podConfigs.GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	pc := obj.(*berthv1alpha1.PodConfig)
	var mine []berthv1alpha1.PodAttachmentStatus
	for _, en := range pc.Status.Pods {
		if en.Node == e.cfg.NodeName {
			mine = append(mine, en)
		}
	}
	if len(mine) == 0 {
		return 0, nil
	}
	// The agent binds again what the operator bound, and checks every network against its own
	// copy of the policy and the node's own ranges: an object written around the CRD's rules
	// (an older CRD, a direct etcd write), an operator whose policy is wider than the node's,
	// or a range the operator cannot see (the node's own networks) never reaches netlink.
	bound, specErrs := e.bind(pc)
	atts := map[string]*berthv1alpha1.NetworkAttachment{}
	for i := range pc.Spec.NetworkAttachments {
		atts[pc.Spec.NetworkAttachments[i].Name] = &pc.Spec.NetworkAttachments[i]
	}
	deleting := !pc.DeletionTimestamp.IsZero()
	var requeue time.Duration
	changed := false
	out := make([]berthv1alpha1.PodAttachmentStatus, 0, len(mine))
	for _, en := range mine {
		r, again := e.entry(ctx, pc, specErrs, atts[en.Attachment], bound, deleting, en)
		if again {
			requeue = retryAfter
		}
		if r.State != en.State {
			r.LastTransitionTime = &metav1.Time{Time: e.cfg.Now().UTC().Truncate(time.Second)}
			switch r.State {
			case berthv1alpha1.AttachmentConfigured, berthv1alpha1.AttachmentFailed, berthv1alpha1.AttachmentRemoved:
				e.applies.WithLabelValues(string(r.State)).Inc()
			}
		}
		if !sameReport(r, en) {
			changed = true
		}
		out = append(out, r)
	}
	if _, err := e.gcShared(); err != nil {
		klog.FromContext(ctx).Error(err, "Removing unused bridges and VLAN links failed")
	}
	if !changed {
		e.syncs.WithLabelValues("ok").Inc()
		return requeue, nil
	}
	if err := e.cfg.Status.Apply(ctx, pc.Namespace, pc.Name, out); err != nil {
		e.writes.WithLabelValues("error").Inc()
		e.syncs.WithLabelValues("error").Inc()
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("applying the status of %s: %w", key, err)
	}
	e.writes.WithLabelValues("ok").Inc()
	e.syncs.WithLabelValues("ok").Inc()
	return requeue, nil
}

func sameReport(a, b berthv1alpha1.PodAttachmentStatus) bool {
	return a.State == b.State && a.LastError == b.LastError && a.Interface == b.Interface && a.Address == b.Address &&
		a.HostPeer == b.HostPeer && a.Bridge == b.Bridge && a.PodUID == b.PodUID && a.Node == b.Node
}

// entry works out (and makes happen) one entry of this node. The second result asks for a
// retry soon.
func (e *Executor) entry(ctx context.Context, pc *berthv1alpha1.PodConfig, specErrs field.ErrorList,
	att *berthv1alpha1.NetworkAttachment, bound map[string]podconfig.Network, deleting bool, en berthv1alpha1.PodAttachmentStatus) (berthv1alpha1.PodAttachmentStatus, bool) {
	log := klog.FromContext(ctx).WithValues("podConfig", klog.KObj(pc), "pod", en.Pod, "attachment", en.Attachment)
	r := en
	hp := podconfig.HostPeerName(en.PodUID, en.Attachment)
	if en.PodUID == "" {
		return r, false
	}
	if deleting || en.State == berthv1alpha1.AttachmentRemoving || en.State == berthv1alpha1.AttachmentRemoved || att == nil {
		return e.removeEntry(log, en, hp)
	}
	if en.State == berthv1alpha1.AttachmentPending || (en.State == berthv1alpha1.AttachmentFailed && en.Address == "") {
		return r, false // the operator's: nothing allocated (exhaustion, interface claimed, refusal)
	}
	if len(specErrs) > 0 {
		// Whatever was made before the refusal (a grant revoked, a node range that appeared)
		// goes: the refusal means the link must not exist.
		if err := e.cfg.Dataplane.Remove(hp); err != nil {
			return failed(r, true, "refused by the node agent (%s), and removing host peer %s failed: %v", podconfig.FormatErrors(specErrs.ToAggregate().Errors()), hp, err)
		}
		return failed(r, false, "refused by the node agent: %s", podconfig.FormatErrors(specErrs.ToAggregate().Errors()))
	}
	network, ok := bound[att.Name]
	if !ok {
		return failed(r, false, "attachment %s is not bound to a network", att.Name)
	}
	addr, ok := e.lookup(network, en.PodUID, en.Attachment)
	if !ok {
		// Not (yet) in the allocation this agent sees: never act on an address the operator
		// has not recorded.
		return r, false
	}
	pod, err := e.pods.Pods(pc.Namespace).Get(en.Pod)
	if err != nil || string(pod.UID) != en.PodUID || pod.Spec.NodeName != e.cfg.NodeName {
		return r, false // gone or not seen yet: the operator removes the entry of a gone pod
	}
	if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return r, false // its sandbox, and the links in it, are going
	}
	if pod.Spec.HostNetwork {
		return failed(r, false, "pod %s uses the host network: attachments are only made in a pod's own network namespace", pod.Name)
	}
	r.Interface, r.HostPeer, r.Bridge, r.Network = att.Name, hp, network.Bridge, network.Name
	r.Address = podconfig.AddressCIDR(addr, network.Prefix)
	sb, err := e.cfg.Resolver.Sandbox(ctx, en.PodUID)
	if st, again, stop := sandboxVerdict(log, r, en, pod, sb, err); stop {
		return st, again
	}
	a := Attachment{NetNS: sb.NetNS, Interface: att.Name, HostPeer: hp, Bridge: network.Bridge, Gateway: network.Gateway,
		Address: netip.PrefixFrom(addr, network.Prefix.Bits()), Alias: pc.Namespace + "/" + pod.Name + " " + att.Name,
		VLAN: network.VLAN, VXLAN: network.VXLAN, MTU: network.MTU, Routes: network.Routes}
	start := time.Now()
	err = e.cfg.Dataplane.Apply(a)
	e.applySeconds.Observe(time.Since(start).Seconds())
	return e.applied(log, r, en, a, sb, err)
}

// failed marks r Failed with the message; again asks for a retry.
func failed(r berthv1alpha1.PodAttachmentStatus, again bool, format string, args ...any) (berthv1alpha1.PodAttachmentStatus, bool) {
	r.State, r.LastError = berthv1alpha1.AttachmentFailed, fmt.Sprintf(format, args...)
	return r, again
}

// removeEntry removes the links of an entry that is going (or whose attachment is gone).
func (e *Executor) removeEntry(log klog.Logger, en berthv1alpha1.PodAttachmentStatus, hp string) (berthv1alpha1.PodAttachmentStatus, bool) {
	r := en
	if en.State == berthv1alpha1.AttachmentRemoved {
		return r, false
	}
	if err := e.cfg.Dataplane.Remove(hp); err != nil {
		// The operator's state stays; lastError says why removal is stuck.
		r.LastError = "removing host peer " + hp + ": " + err.Error()
		return r, true
	}
	log.V(2).Info("Attachment removed", "hostPeer", hp)
	r.State, r.LastError, r.HostPeer, r.Interface = berthv1alpha1.AttachmentRemoved, "", hp, en.Attachment
	return r, false
}

// sandboxVerdict reads the runtime's answer for the pod's sandbox (sb, err). stop says the
// entry goes no further this time, with the status to report and whether to retry.
func sandboxVerdict(log klog.Logger, r, en berthv1alpha1.PodAttachmentStatus, pod *corev1.Pod, sb Sandbox, err error) (st berthv1alpha1.PodAttachmentStatus, again, stop bool) {
	var rerr *RuntimeError
	switch {
	case errors.Is(err, ErrNoSandbox):
		if pod.Status.Phase == corev1.PodPending && en.State != berthv1alpha1.AttachmentConfigured {
			return en, true, true // the kubelet is still creating it
		}
		st, again = failed(r, true, "pod %s (phase %s) has no ready sandbox in the container runtime", pod.Name, pod.Status.Phase)
	case errors.As(err, &rerr):
		if en.State == berthv1alpha1.AttachmentConfigured {
			// Links do not depend on the runtime: keep reporting what was made.
			log.Error(err, "Cannot check the sandbox; keeping the configured attachment")
			return en, true, true
		}
		st, again = failed(r, true, "%v", err)
	case err != nil:
		st, again = failed(r, true, "finding the sandbox of pod %s: %v", pod.Name, err)
	case sb.HostNetwork:
		st, again = failed(r, false, "pod %s's sandbox uses the node's network namespace", pod.Name)
	default:
		return r, false, false
	}
	return st, again, true
}

// applied turns the dataplane's answer to a (err) into the entry's status.
func (e *Executor) applied(log klog.Logger, r, en berthv1alpha1.PodAttachmentStatus, a Attachment, sb Sandbox, err error) (berthv1alpha1.PodAttachmentStatus, bool) {
	var conflict *ConflictError
	var unsupported *UnsupportedError
	switch {
	case err == nil:
		if en.State != berthv1alpha1.AttachmentConfigured {
			log.Info("Attachment configured", "interface", a.Interface, "address", a.Address, "hostPeer", a.HostPeer, "bridge", a.Bridge, "sandbox", short(sb.ID))
		}
		r.State, r.LastError = berthv1alpha1.AttachmentConfigured, ""
		return r, false
	case vanished(err):
		// The sandbox stopped under us: whatever half of the pair exists goes now, and the
		// next sandbox (if any) is configured on the retry.
		_ = e.cfg.Dataplane.Remove(a.HostPeer)
		return failed(r, true, "the pod's network namespace vanished while it was being configured (sandbox %s stopped or replaced): %v", short(sb.ID), err)
	case errors.As(err, &conflict):
		return failed(r, false, "%s", conflict.Msg)
	case errors.As(err, &unsupported):
		return failed(r, false, "%s", unsupported.Msg)
	default:
		return failed(r, true, "%v", err)
	}
}

// lookup finds the address the operator allocated to (podUID, attachment) in the network's
// IPAllocation.
func (e *Executor) lookup(n podconfig.Network, podUID, attachment string) (netip.Addr, bool) {
	obj, ok, _ := e.allocs.GetByKey(n.Name)
	if !ok {
		return netip.Addr{}, false
	}
	al := obj.(*berthv1alpha1.IPAllocation)
	if al.Spec.Master != n.Bridge || al.Spec.CIDR != n.Prefix.String() {
		return netip.Addr{}, false
	}
	for _, a := range al.Spec.Allocations {
		if a.PodUID == podUID && a.Attachment == attachment {
			if ad, err := netip.ParseAddr(a.Address); err == nil && n.Prefix.Contains(ad) {
				return ad, true
			}
		}
	}
	return netip.Addr{}, false
}
