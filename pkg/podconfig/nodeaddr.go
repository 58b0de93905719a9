package podconfig

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NodeAddresses returns every IP address in the nodes' status.addresses as a single-address
// range named after the node and the address's type ("node n2's InternalIP"), so a network
// that contains one, or uses one as gateway or via, is refused naming the node. Why every
// node's: a gateway that is another node's address, put on a bridge of this node, answers
// for that node here and breaks whatever reaches it through this one (the API server's
// kubelet connections among them). Loopback, link-local and unspecified addresses are left
// out (NeverRanges refuses them anyway, and every KWOK node reports 127.0.0.1); an address two
// nodes report is named once, after the first in name order.
func NodeAddresses(nodes []*corev1.Node) []NamedPrefix {
	order := slices.Clone(nodes)
	sort.Slice(order, func(i, j int) bool { return order[i].Name < order[j].Name })
	seen := map[netip.Addr]bool{}
	var out []NamedPrefix
	for _, n := range order {
		for _, a := range n.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				continue // a Hostname or DNS name
			}
			ip = ip.Unmap()
			if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || seen[ip] {
				continue
			}
			seen[ip] = true
			out = append(out, NamedPrefix{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Name: fmt.Sprintf("node %s's %s", n.Name, a.Type)})
		}
	}
	return out
}

// HasPodCIDR reports whether any node has spec.podCIDR or spec.podCIDRs: whether the pod
// range can be discovered at all.
func HasPodCIDR(nodes []corev1.Node) bool {
	for i := range nodes {
		if nodes[i].Spec.PodCIDR != "" || len(nodes[i].Spec.PodCIDRs) > 0 {
			return true
		}
	}
	return false
}

// NoPodRangeMessage is why every network is refused while the pod range is unknown: no node
// has a podCIDR and no cluster CIDR is configured. It names the value that lets the operator
// decide again.
const NoPodRangeMessage = "the cluster's pod range is unknown: no node has spec.podCIDR and podConfig.clusterCIDRs " +
	"(--podconfig-cluster-cidrs) is empty, so no network can be proved clear of pods' and nodes' addresses; " +
	"set podConfig.clusterCIDRs to the cluster's pod range (and service range)"

// NoPodRange is the refusal of every network while the pod range is unknown (NoPodRangeMessage),
// on the field it is about.
func NoPodRange() field.ErrorList {
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "cidr"), NoPodRangeMessage)}
}

// addrIn returns the first of ranges that holds a, and how to say so.
func addrIn(a netip.Addr, ranges []NamedPrefix) (string, bool) {
	for _, r := range ranges {
		if r.Prefix.Contains(a) {
			if r.Prefix.IsSingleIP() {
				return fmt.Sprintf("%s is %s", a, r.Name), true
			}
			return fmt.Sprintf("%s is inside %s", a, r), true
		}
	}
	return "", false
}
