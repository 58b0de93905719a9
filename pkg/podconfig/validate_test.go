package podconfig

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

func goodNetwork() *berthv1alpha1.PodNetwork {
	return &berthv1alpha1.PodNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "blue"},
		Spec: berthv1alpha1.PodNetworkSpec{Bridge: "berth-blue", CIDR: "192.168.100.0/24", Gateway: "192.168.100.1",
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}},
	}
}

func networkWith(mutate func(*berthv1alpha1.PodNetworkSpec)) *berthv1alpha1.PodNetwork {
	pn := goodNetwork()
	if mutate != nil {
		mutate(&pn.Spec)
	}
	return pn
}

var testPolicy = Policy{
	ClusterCIDRs:   []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10::/56")},
	NodeNetworks:   []netip.Prefix{netip.MustParsePrefix("172.18.0.0/16")},
	BridgePrefix:   DefaultBridgePrefix,
	AllowedParents: []string{"ens9"},
}

// discovered stands for what the operator read from the API (a ServiceCIDR).
var discovered = []NamedPrefix{{netip.MustParsePrefix("10.96.0.0/12"), "the service range (ServiceCIDR kubernetes)"}}

func hasError(errs field.ErrorList, wantField, wantMsg string) bool {
	for _, e := range errs {
		if e.Field == wantField && strings.Contains(e.Error(), wantMsg) {
			return true
		}
	}
	return false
}

// wantError: errs is empty when wantField is, else holds an error on wantField containing
// wantMsg.
func wantError(t *testing.T, errs field.ErrorList, wantField, wantMsg string) {
	t.Helper()
	if wantField == "" {
		if len(errs) != 0 {
			t.Fatalf("refused: %v", errs)
		}
		return
	}
	if !hasError(errs, wantField, wantMsg) {
		t.Fatalf("want an error on %s containing %q, got %v", wantField, wantMsg, errs)
	}
}

// Every refusal names the field and the rule, so the admin (and the Accepted condition)
// knows what to fix. The attacks of issue 20 are rows here: a network is the admin's, but the
// same rules hold even for an admin's mistake.
func TestValidateNetwork(t *testing.T) {
	routes := func(rs ...berthv1alpha1.Route) func(*berthv1alpha1.PodNetworkSpec) {
		return func(s *berthv1alpha1.PodNetworkSpec) { s.Routes = rs }
	}
	cidr := func(c, gw string) func(*berthv1alpha1.PodNetworkSpec) {
		return func(s *berthv1alpha1.PodNetworkSpec) { s.CIDR, s.Gateway = c, gw }
	}
	cases := []struct {
		name      string
		mutate    func(*berthv1alpha1.PodNetworkSpec)
		wantField string // empty: accepted
		wantMsg   string
	}{
		{"accepted v4", nil, "", ""},
		{"accepted v6", cidr("fd00:1::/120", "fd00:1::1"), "", ""},
		{"accepted without gateway", cidr("192.168.100.0/24", ""), "", ""},
		{"accepted vlan on allowed parent", func(s *berthv1alpha1.PodNetworkSpec) { s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 100, Parent: "ens9"} }, "", ""},
		{"accepted route", routes(berthv1alpha1.Route{Destination: "192.168.200.0/24"}), "", ""},
		{"CNI bridge cni0", func(s *berthv1alpha1.PodNetworkSpec) { s.Bridge = "cni0" }, "spec.bridge", "host or CNI"},
		{"host eth0", func(s *berthv1alpha1.PodNetworkSpec) { s.Bridge = "eth0" }, "spec.bridge", "host or CNI"},
		{"bridge outside prefix", func(s *berthv1alpha1.PodNetworkSpec) { s.Bridge = "br-tenant" }, "spec.bridge", "does not start with"},
		{"bridge charset", func(s *berthv1alpha1.PodNetworkSpec) { s.Bridge = "berth.0" }, "spec.bridge", "must match"},
		{"parent not allow-listed", func(s *berthv1alpha1.PodNetworkSpec) { s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 100, Parent: "eth0"} }, "spec.vlan.parent", "allowed parents"},
		{"vlan id out of range", func(s *berthv1alpha1.PodNetworkSpec) {
			s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 4095, Parent: "ens9"}
		}, "spec.vlan.id", "1..4094"},
		{"accepted vxlan on allowed parent", func(s *berthv1alpha1.PodNetworkSpec) { s.VXLAN = vxlan(100, "ens9", "239.1.1.1") }, "", ""},
		{"vxlan parent not allow-listed", func(s *berthv1alpha1.PodNetworkSpec) { s.VXLAN = vxlan(100, "eth0", "239.1.1.1") }, "spec.vxlan.parent", "allowed parents"},
		{"vxlan vni out of range", func(s *berthv1alpha1.PodNetworkSpec) { s.VXLAN = vxlan(1<<24, "ens9", "239.1.1.1") }, "spec.vxlan.vni", "1..16777215"},
		{"vxlan unicast group", func(s *berthv1alpha1.PodNetworkSpec) { s.VXLAN = vxlan(100, "ens9", "10.0.0.1") }, "spec.vxlan.group", "multicast"},
		{"vxlan link-local control group", func(s *berthv1alpha1.PodNetworkSpec) { s.VXLAN = vxlan(100, "ens9", "224.0.0.5") }, "spec.vxlan.group", "224.0.0.0/24"},
		{"vxlan IPv6 group", func(s *berthv1alpha1.PodNetworkSpec) { s.VXLAN = vxlan(100, "ens9", "ff05::1") }, "spec.vxlan.group", "IPv4"},
		{"vxlan parent is the bridge", func(s *berthv1alpha1.PodNetworkSpec) { s.VXLAN = vxlan(100, s.Bridge, "239.1.1.1") }, "spec.vxlan.parent", "own bridge"},
		{"vxlan port out of range", func(s *berthv1alpha1.PodNetworkSpec) { s.VXLAN = vxlan(100, "ens9", "239.1.1.1"); s.VXLAN.Port = 70000 }, "spec.vxlan.port", "1..65535"},
		{"vlan and vxlan", func(s *berthv1alpha1.PodNetworkSpec) {
			s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 100, Parent: "ens9"}
			s.VXLAN = vxlan(100, "ens9", "239.1.1.1")
		}, "spec.vxlan", "not both"},
		{"cidr does not parse", cidr("192.168.100.0/33", ""), "spec.cidr", "must be a CIDR"},
		{"cidr host bits", cidr("192.168.100.7/24", ""), "spec.cidr", "host bits"},
		{"metadata service", cidr("169.254.169.0/24", "169.254.169.254"), "spec.cidr", "169.254.169.254"},
		{"loopback", cidr("127.0.0.0/8", ""), "spec.cidr", "loopback"},
		{"inside loopback", cidr("127.1.0.0/16", ""), "spec.cidr", "loopback"},
		{"multicast", cidr("239.1.0.0/16", ""), "spec.cidr", "multicast"},
		{"v6 link-local", cidr("fe80::/64", ""), "spec.cidr", "link-local"},
		{"v6 loopback", cidr("::1/128", ""), "spec.cidr", "loopback"},
		{"v6 multicast", cidr("ff02::/16", ""), "spec.cidr", "multicast"},
		{"v4 default", cidr("0.0.0.0/0", ""), "spec.cidr", "wider than a /8"},
		{"v6 default", cidr("::/0", ""), "spec.cidr", "wider than a /8"},
		{"unspecified /8", cidr("0.0.0.0/8", ""), "spec.cidr", "unspecified"},
		{"pod CIDR", cidr("10.244.3.0/24", ""), "spec.cidr", "overlaps the cluster's network 10.244.0.0/16"},
		{"inside the discovered service CIDR", cidr("10.96.5.0/24", ""), "spec.cidr", "ServiceCIDR kubernetes"},
		{"node network", cidr("172.18.5.0/24", ""), "spec.cidr", "the node network"},
		{"v6 pod CIDR", cidr("fd00:10::/64", ""), "spec.cidr", "overlaps"},
		{"gateway outside cidr", cidr("192.168.100.0/24", "192.168.101.1"), "spec.gateway", "inside cidr"},
		{"gateway is network address", cidr("192.168.100.0/24", "192.168.100.0"), "spec.gateway", "network address"},
		{"gateway is broadcast", cidr("192.168.100.0/24", "192.168.100.255"), "spec.gateway", "broadcast"},
		{"gateway not an IP", cidr("192.168.100.0/24", "gw"), "spec.gateway", "IP address"},
		{"default route", routes(berthv1alpha1.Route{Destination: "0.0.0.0/0"}), "spec.routes[0].destination", "default route"},
		{"route to the metadata address", routes(berthv1alpha1.Route{Destination: "169.254.169.254/32"}), "spec.routes[0].destination", "169.254.169.254"},
		{"route to the pod CIDR", routes(berthv1alpha1.Route{Destination: "10.244.0.0/16"}), "spec.routes[0].destination", "the cluster's network"},
		{"route to the service range", routes(berthv1alpha1.Route{Destination: "10.96.0.0/16"}), "spec.routes[0].destination", "ServiceCIDR"},
		{"route to multicast", routes(berthv1alpha1.Route{Destination: "239.0.0.0/8"}), "spec.routes[0].destination", "multicast"},
		{"route via outside cidr", routes(berthv1alpha1.Route{Destination: "172.16.0.0/16", Via: "172.16.0.1"}), "spec.routes[0].via", "inside cidr"},
		{"route of another family", routes(berthv1alpha1.Route{Destination: "fd00:5::/64"}), "spec.routes[0].destination", "family"},
		{"mtu too small", func(s *berthv1alpha1.PodNetworkSpec) { s.MTU = ptr.To[int32](67) }, "spec.mtu", "68"},
		{"bad namespace selector", func(s *berthv1alpha1.PodNetworkSpec) {
			s.NamespaceSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
		}, "spec.namespaceSelector.matchExpressions[0].operator", "Near"},
	}
	reserved := testPolicy.Reserved(discovered)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := testPolicy.ValidateNetwork(networkWith(tc.mutate), reserved)
			wantError(t, errs, tc.wantField, tc.wantMsg)
		})
	}
}

func TestValidateSpec(t *testing.T) {
	cases := []struct {
		name      string
		atts      []berthv1alpha1.NetworkAttachment
		wantField string
		wantMsg   string
	}{
		{"accepted", []berthv1alpha1.NetworkAttachment{{Name: "net1", Network: "blue"}}, "", ""},
		{"16-character name", []berthv1alpha1.NetworkAttachment{{Name: "abcdefghijklmnop", Network: "blue"}}, "spec.networkAttachments[0].name", "15"},
		{"unsafe charset", []berthv1alpha1.NetworkAttachment{{Name: "net/1", Network: "blue"}}, "spec.networkAttachments[0].name", "must match"},
		{"eth0 reserved", []berthv1alpha1.NetworkAttachment{{Name: "eth0", Network: "blue"}}, "spec.networkAttachments[0].name", "pod's own"},
		{"no network", []berthv1alpha1.NetworkAttachment{{Name: "net1"}}, "spec.networkAttachments[0].network", "PodNetwork"},
		{"duplicate name", []berthv1alpha1.NetworkAttachment{{Name: "net1", Network: "blue"}, {Name: "net1", Network: "red"}}, "spec.networkAttachments[1].name", "Duplicate"},
		{"same network twice", []berthv1alpha1.NetworkAttachment{{Name: "net1", Network: "blue"}, {Name: "net2", Network: "blue"}}, "spec.networkAttachments[1].network", "one address per network"},
		{"none", nil, "spec.networkAttachments", "Required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateSpec(&berthv1alpha1.PodConfigSpec{NetworkAttachments: tc.atts}, field.NewPath("spec"))
			wantError(t, errs, tc.wantField, tc.wantMsg)
		})
	}
}

func TestPolicyCheck(t *testing.T) {
	cases := []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"default", Policy{BridgePrefix: "berth"}, true},
		{"empty prefix", Policy{}, false},
		{"prefix matching a CNI bridge", Policy{BridgePrefix: "cni"}, false},
		{"prefix matching eth0", Policy{BridgePrefix: "eth"}, false},
		{"prefix not an interface name", Policy{BridgePrefix: "Berth_"}, false},
		{"bad parent", Policy{BridgePrefix: "berth", AllowedParents: []string{"a/b"}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.Check(); (err == nil) != tc.ok {
				t.Fatalf("Check() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// Networks are decided oldest first against the accepted older ones only: an older network
// keeps its bridge, range and VLAN, and a refused network claims nothing (the squatting attack:
// an invalid object must not block a bridge name).
func TestAcceptNetworks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(name string, age int, spec berthv1alpha1.PodNetworkSpec) berthv1alpha1.PodNetwork {
		return berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))}, Spec: spec}
	}
	spec := func(bridge, cidr string) berthv1alpha1.PodNetworkSpec {
		return berthv1alpha1.PodNetworkSpec{Bridge: bridge, CIDR: cidr}
	}
	accepted := func(pn berthv1alpha1.PodNetwork) berthv1alpha1.PodNetwork {
		pn.Status.Conditions = []metav1.Condition{{Type: berthv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue}}
		return pn
	}
	withVXLAN := func(s berthv1alpha1.PodNetworkSpec, vni, port int32) berthv1alpha1.PodNetworkSpec {
		s.VXLAN = vxlan(vni, "ens9", "239.1.1.1")
		s.VXLAN.Port = port
		return s
	}
	vlan := func(s berthv1alpha1.PodNetworkSpec, id int32) berthv1alpha1.PodNetworkSpec {
		s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: id, Parent: "ens9"}
		return s
	}
	cases := []struct {
		name    string
		nets    []berthv1alpha1.PodNetwork
		refused map[string]string // name -> field; missing: accepted
	}{
		{"independent", []berthv1alpha1.PodNetwork{mk("a", 0, spec("berth1", "192.168.1.0/24")), mk("b", 1, spec("berth2", "192.168.2.0/24"))}, nil},
		{"same bridge: newer refused", []berthv1alpha1.PodNetwork{mk("b", 1, spec("berth1", "192.168.2.0/24")), mk("a", 0, spec("berth1", "192.168.1.0/24"))},
			map[string]string{"b": "spec.bridge"}},
		{"overlapping range: newer refused", []berthv1alpha1.PodNetwork{mk("a", 0, spec("berth1", "192.168.0.0/16")), mk("b", 1, spec("berth2", "192.168.2.0/24"))},
			map[string]string{"b": "spec.cidr"}},
		{"same VLAN: newer refused", []berthv1alpha1.PodNetwork{mk("a", 0, vlan(spec("berth1", "192.168.1.0/24"), 7)), mk("b", 1, vlan(spec("berth2", "192.168.2.0/24"), 7))},
			map[string]string{"b": "spec.vlan"}},
		{"same VXLAN (default port = 4789): newer refused", []berthv1alpha1.PodNetwork{mk("a", 0, withVXLAN(spec("berth1", "192.168.1.0/24"), 7, 0)), mk("b", 1, withVXLAN(spec("berth2", "192.168.2.0/24"), 7, 4789))},
			map[string]string{"b": "spec.vxlan"}},
		{"same VNI on another port: both accepted", []berthv1alpha1.PodNetwork{mk("a", 0, withVXLAN(spec("berth1", "192.168.1.0/24"), 7, 0)), mk("b", 1, withVXLAN(spec("berth2", "192.168.2.0/24"), 7, 8472))},
			nil},
		{"refused older squats nothing", []berthv1alpha1.PodNetwork{mk("squat", 0, spec("berth1", "0.0.0.0/0")), mk("b", 1, spec("berth1", "192.168.2.0/24"))},
			map[string]string{"squat": "spec.cidr"}},
		{"same age: name orders", []berthv1alpha1.PodNetwork{mk("z", 0, spec("berth1", "192.168.2.0/24")), mk("a", 0, spec("berth1", "192.168.1.0/24"))},
			map[string]string{"z": "spec.bridge"}},
		// A newcomer of the same second whose name sorts first must not take the bridge of a
		// network already accepted (and in use).
		{"accepted keeps its bridge against a same-second newcomer", []berthv1alpha1.PodNetwork{accepted(mk("zz-first", 0, spec("berth1", "192.168.2.0/24"))), mk("aa-second", 0, spec("berth1", "192.168.1.0/24"))},
			map[string]string{"aa-second": "spec.bridge"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := testPolicy.AcceptNetworks(tc.nets, nil)
			for _, n := range tc.nets {
				errs := got[n.Name]
				want, refuse := tc.refused[n.Name]
				switch {
				case !refuse && len(errs) > 0:
					t.Errorf("%s refused: %v", n.Name, errs)
				case refuse && (len(errs) == 0 || errs[0].Field != want):
					t.Errorf("%s: want a refusal on %s, got %v", n.Name, want, errs)
				}
			}
		})
	}
}

// Bind is the tenant's only path to a network: it must exist, be accepted, not be going, and
// grant the PodConfig's namespace.
func TestBind(t *testing.T) {
	accepted := func(pn *berthv1alpha1.PodNetwork) *berthv1alpha1.PodNetwork {
		pn.Status.Conditions = []metav1.Condition{{Type: berthv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue}}
		return pn
	}
	refused := goodNetwork()
	refused.Status.Conditions = []metav1.Condition{{Type: berthv1alpha1.ConditionAccepted, Status: metav1.ConditionFalse, Message: "spec.cidr: overlaps"}}
	deleting := accepted(goodNetwork())
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	all := accepted(networkWith(func(s *berthv1alpha1.PodNetworkSpec) { s.NamespaceSelector = metav1.LabelSelector{} }))
	cases := []struct {
		name     string
		network  *berthv1alpha1.PodNetwork
		nsLabels map[string]string
		wantMsg  string // empty: bound
	}{
		{"granted", accepted(goodNetwork()), map[string]string{"team": "blue"}, ""},
		{"empty selector grants every namespace", all, nil, ""},
		{"another tenant's network", accepted(goodNetwork()), map[string]string{"team": "red"}, "does not grant namespace t"},
		{"missing", nil, map[string]string{"team": "blue"}, "no PodNetwork of that name"},
		{"refused", refused, map[string]string{"team": "blue"}, "not accepted: spec.cidr: overlaps"},
		{"undecided", goodNetwork(), map[string]string{"team": "blue"}, "not decided"},
		{"deleting", deleting, map[string]string{"team": "blue"}, "being deleted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pc := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "pc"},
				Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{{Name: "net1", Network: "blue"}}}}
			bound, errs := Bind(pc, func(string) *berthv1alpha1.PodNetwork { return tc.network }, tc.nsLabels)
			if tc.wantMsg == "" {
				if len(errs) > 0 || bound["net1"].Bridge != "berth-blue" || bound["net1"].Gateway.String() != "192.168.100.1" {
					t.Fatalf("want net1 bound to berth-blue, got %v, %v", bound, errs)
				}
				return
			}
			if bound != nil || !hasError(errs, "spec.networkAttachments[0].network", tc.wantMsg) {
				t.Fatalf("want nothing bound and an error on spec.networkAttachments[0].network containing %q, got %v, %v", tc.wantMsg, bound, errs)
			}
		})
	}
	if got := HostPeerName("uid-1", "net1"); len(got) > MaxInterfaceName || got == HostPeerName("uid-2", "net1") || got != HostPeerName("uid-1", "net1") {
		t.Fatalf("HostPeerName %q: must be ≤15 characters, stable, and differ between pods", got)
	}
}

func vxlan(vni int32, parent, group string) *berthv1alpha1.PodNetworkVXLAN {
	return &berthv1alpha1.PodNetworkVXLAN{VNI: vni, Parent: parent, Group: group}
}
