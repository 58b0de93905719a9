package podnet

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// bind binds pc as the operator does (podconfig.Bind over this agent's caches) and checks
// every bound network again with the agent's policy, the node's own ranges and every node's
// addresses.
func (e *Executor) bind(pc *berthv1alpha1.PodConfig) (map[string]podconfig.Network, field.ErrorList) {
	var nsLabels map[string]string
	if ns, err := e.namespaces.Get(pc.Namespace); err == nil {
		nsLabels = ns.Labels
	}
	bound, errs := podconfig.Bind(pc, e.network, nsLabels)
	if len(errs) > 0 {
		return nil, errs
	}
	hostRanges, err := e.cfg.Dataplane.HostRanges()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(field.NewPath("spec", "networkAttachments"), fmt.Errorf("listing the node's own ranges: %w", err))}
	}
	nodeAddrs, err := e.nodeAddresses()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(field.NewPath("spec", "networkAttachments"), fmt.Errorf("listing the cluster's nodes: %w", err))}
	}
	// why every node's and not only this one's links: a gateway that is another node's
	// address, put on a bridge here, answers for that node on this one (issue 35: the API
	// server's connections to berth-real-3's kubelet broke).
	reserved := e.cfg.Policy.Reserved(append(hostRanges, nodeAddrs...))
	for i, a := range pc.Spec.NetworkAttachments {
		for _, err := range e.cfg.Policy.ValidateNetwork(e.network(a.Network), reserved) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "networkAttachments").Index(i).Child("network"), a.Network,
				"PodNetwork "+a.Network+": "+err.Error()))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return bound, nil
}

// network returns the PodNetwork of that name from the cache, or nil.
func (e *Executor) network(name string) *berthv1alpha1.PodNetwork {
	obj, ok, _ := e.networks.GetByKey(name)
	if !ok {
		return nil
	}
	return obj.(*berthv1alpha1.PodNetwork)
}

// nodeAddresses is every address the nodes in the agent's cache report (podconfig.NodeAddresses).
func (e *Executor) nodeAddresses() ([]podconfig.NamedPrefix, error) {
	if e.cfg.Nodes == nil {
		return nil, nil
	}
	nodes, err := e.cfg.Nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return podconfig.NodeAddresses(nodes), nil
}
