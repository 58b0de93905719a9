package podnet

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// Sweep removes host peers no allocation of this node accounts for (a node that was dead
// while the operator freed its addresses, an agent killed after creating a link whose pod
// then went) and bridges the agent created that nothing uses, and refreshes the gauges.
func (e *Executor) Sweep(ctx context.Context) error {
	log := klog.FromContext(ctx)
	keep := map[string]bool{}
	for _, o := range e.allocs.List() {
		for _, a := range o.(*berthv1alpha1.IPAllocation).Spec.Allocations {
			if a.Node == "" || a.Node == e.cfg.NodeName {
				keep[podconfig.HostPeerName(a.PodUID, a.Attachment)] = true
			}
		}
	}
	peers, err := e.cfg.Dataplane.HostPeers()
	if err != nil {
		return fmt.Errorf("listing host peers: %w", err)
	}
	var errs []error
	for _, p := range peers {
		if keep[p] {
			continue
		}
		if err := e.cfg.Dataplane.Remove(p); err != nil {
			errs = append(errs, err)
			continue
		}
		e.swept.WithLabelValues("peer").Inc()
		log.Info("Removed a host peer no allocation accounts for", "hostPeer", p)
	}
	removed, err := e.gcShared()
	if err != nil {
		errs = append(errs, err)
	}
	for _, b := range removed {
		log.Info("Removed an unused link", "link", b)
	}
	return errors.Join(errs...)
}

// gcShared removes what attachments share on the node once no live entry of this node needs
// it: first the agent's VLAN sub-interfaces and VXLAN links (bridge ports), then the agent's
// bridges that have no port left. It refreshes the per-state gauge.
func (e *Executor) gcShared() ([]string, error) {
	keepBridges, keepVLANs := map[string]bool{}, map[string]bool{}
	states := map[string]float64{}
	for _, o := range e.podConfigs.List() {
		pc := o.(*berthv1alpha1.PodConfig)
		nets := map[string]string{}
		for _, a := range pc.Spec.NetworkAttachments {
			nets[a.Name] = a.Network
		}
		for _, en := range pc.Status.Pods {
			if en.Node != e.cfg.NodeName {
				continue
			}
			states[string(en.State)]++
			if !pc.DeletionTimestamp.IsZero() || en.State == berthv1alpha1.AttachmentRemoving || en.State == berthv1alpha1.AttachmentRemoved {
				continue
			}
			keepBridges[en.Bridge] = true
			if pn := e.network(nets[en.Attachment]); pn != nil {
				if name := uplinkName(&pn.Spec); name != "" {
					keepVLANs[name] = true
					keepBridges[pn.Spec.Bridge] = true
				}
			}
		}
	}
	e.attachments.Reset()
	for s, n := range states {
		e.attachments.WithLabelValues(s).Set(n)
	}
	vlans, verr := e.cfg.Dataplane.RemoveUnusedVLANs(keepVLANs)
	e.swept.WithLabelValues("vlan").Add(float64(len(vlans)))
	bridges, berr := e.cfg.Dataplane.RemoveUnusedBridges(keepBridges)
	e.swept.WithLabelValues("bridge").Add(float64(len(bridges)))
	return append(vlans, bridges...), errors.Join(verr, berr)
}

// uplinkName is the host name of the VLAN or VXLAN link a network puts on its bridge, "" for
// none.
func uplinkName(spec *berthv1alpha1.PodNetworkSpec) string {
	switch {
	case spec.VLAN != nil:
		return VLANLinkName(spec.VLAN.Parent, int(spec.VLAN.ID))
	case spec.VXLAN != nil:
		return VXLANLinkName(spec.VXLAN.Parent, int(spec.VXLAN.VNI), podconfig.VXLANPort(spec.VXLAN.Port))
	}
	return ""
}
