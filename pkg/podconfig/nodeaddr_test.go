package podconfig

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

func nodeWith(name string, podCIDR string, addrs ...corev1.NodeAddress) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	return n
}

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

// Every IP a node reports is a single-address range named after the node and the address's
// type; names, loopback (every KWOK node's) and link-local are not, and an address two nodes
// report is named once.
func TestNodeAddresses(t *testing.T) {
	nodes := []*corev1.Node{
		nodeWith("b-node", "", internal("10.244.2.1"), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "b-node"},
			corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "2001:db8::7"}),
		nodeWith("a-node", "", internal("10.244.1.1"), internal("10.244.2.1")),
		nodeWith("kwok-1", "", internal("127.0.0.1")),
		nodeWith("ll", "", internal("169.254.3.3"), internal("fe80::1")),
		nodeWith("junk", "", internal("not-an-ip"), internal("")),
	}
	got := NodeAddresses(nodes)
	var s []string
	for _, r := range got {
		s = append(s, r.String())
	}
	want := []string{
		"node a-node's InternalIP 10.244.1.1/32",
		"node a-node's InternalIP 10.244.2.1/32",
		"node b-node's ExternalIP 2001:db8::7/128",
	}
	if !slices.Equal(s, want) {
		t.Fatalf("NodeAddresses:\n got %q\nwant %q", s, want)
	}
}

func TestHasPodCIDR(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		want  bool
	}{
		{"no nodes", nil, false},
		{"nodes without podCIDR", []corev1.Node{*nodeWith("a", "", internal("10.0.0.1"))}, false},
		{"one node with podCIDR", []corev1.Node{*nodeWith("a", ""), *nodeWith("b", "10.244.1.0/24")}, true},
		{"podCIDRs only", []corev1.Node{{Spec: corev1.NodeSpec{PodCIDRs: []string{"fd00::/64"}}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HasPodCIDR(tc.nodes); got != tc.want {
				t.Fatalf("HasPodCIDR = %v, want %v", got, tc.want)
			}
		})
	}
}

// A network that contains a node's address, or uses one as gateway or as a route's via or
// destination, is refused on each field it names, naming the node and the address: the attack
// of issue 35 (gateway 10.244.2.1, node berth-real-3's address) among them. Ranges without
// node addresses on clusters without a discovered pod range are still refused by the
// reserved ranges alone; these rows hold with no cluster CIDR at all.
func TestValidateNetworkNodeAddresses(t *testing.T) {
	nodes := []*corev1.Node{
		nodeWith("berth-real", "", internal("10.244.0.1")),
		nodeWith("berth-real-3", "", internal("10.244.2.1")),
		nodeWith("v6", "", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "fd00:9::5"}),
	}
	reserved := Policy{BridgePrefix: DefaultBridgePrefix}.Reserved(NodeAddresses(nodes))
	spec := func(cidr, gw string, routes ...berthv1alpha1.Route) *berthv1alpha1.PodNetwork {
		return networkWith(func(s *berthv1alpha1.PodNetworkSpec) { s.CIDR, s.Gateway, s.Routes = cidr, gw, routes })
	}
	type want struct{ field, msg string }
	for _, tc := range []struct {
		name string
		pn   *berthv1alpha1.PodNetwork
		want []want // every error expected; none: accepted
	}{
		{"clear of every node", spec("192.168.100.0/24", "192.168.100.1"), nil},
		{"range holds another node's address", spec("10.244.2.0/24", ""),
			[]want{{"spec.cidr", "10.244.2.0/24 overlaps node berth-real-3's InternalIP 10.244.2.1/32"}}},
		{"gateway is another node's address (issue 35)", spec("10.244.2.0/24", "10.244.2.1"),
			[]want{{"spec.cidr", "berth-real-3"}, {"spec.gateway", "10.244.2.1 is node berth-real-3's InternalIP"}}},
		{"wide range over two nodes names the first", spec("10.244.0.0/22", "10.244.3.1"),
			[]want{{"spec.cidr", "node berth-real's InternalIP 10.244.0.1/32"}}},
		{"route to a node's address", spec("192.168.100.0/24", "192.168.100.1", berthv1alpha1.Route{Destination: "10.244.0.0/24"}),
			[]want{{"spec.routes[0].destination", "10.244.0.0/24 overlaps node berth-real's InternalIP"}}},
		{"route to a host route of a node", spec("192.168.100.0/24", "", berthv1alpha1.Route{Destination: "10.244.2.1/32"}),
			[]want{{"spec.routes[0].destination", "berth-real-3"}}},
		{"route via a node's address", spec("10.244.2.0/24", "10.244.2.9", berthv1alpha1.Route{Destination: "192.168.5.0/24", Via: "10.244.2.1"}),
			[]want{{"spec.cidr", "berth-real-3"}, {"spec.routes[0].via", "10.244.2.1 is node berth-real-3's InternalIP: never a next hop"}}},
		{"v6 range holds a node's address", spec("fd00:9::/64", ""),
			[]want{{"spec.cidr", "node v6's ExternalIP fd00:9::5/128"}}},
		{"a range beside the node's address", spec("10.244.3.0/24", "10.244.3.1"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := testPolicy.withoutCIDRs().ValidateNetwork(tc.pn, reserved)
			if len(errs) != len(tc.want) {
				t.Fatalf("want %d errors %v, got %v", len(tc.want), tc.want, errs)
			}
			for _, w := range tc.want {
				if !hasError(errs, w.field, w.msg) {
					t.Errorf("want an error on %s containing %q, got %v", w.field, w.msg, errs)
				}
			}
		})
	}
}

// withoutCIDRs is p without configured ranges: only what the test passes as reserved counts.
func (p Policy) withoutCIDRs() Policy {
	p.ClusterCIDRs, p.NodeNetworks = nil, nil
	return p
}
