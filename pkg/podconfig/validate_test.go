package podconfig

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

func goodAttachment() berthv1alpha1.NetworkAttachment {
	return berthv1alpha1.NetworkAttachment{Name: "net1", LinkType: berthv1alpha1.LinkVeth, Master: "berth0", CIDR: "192.168.100.0/24", Gateway: "192.168.100.1"}
}

func pcWith(mutate func(*berthv1alpha1.NetworkAttachment)) *berthv1alpha1.PodConfig {
	a := goodAttachment()
	if mutate != nil {
		mutate(&a)
	}
	return &berthv1alpha1.PodConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "pc", UID: "u1"},
		Spec:       berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{a}},
	}
}

var testPolicy = Policy{
	ClusterCIDRs:   []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:10::/56")},
	BridgePrefix:   DefaultBridgePrefix,
	AllowedBridges: []string{"tenantbr"},
	AllowedParents: []string{"ens9"},
}

// Every refusal must name the field it is about, so the user (and the Degraded condition)
// knows what to fix.
func TestPolicyValidate(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(*berthv1alpha1.NetworkAttachment)
		wantField string // empty: accepted
		wantMsg   string
	}{
		{"accepted v4", nil, "", ""},
		{"accepted v6 any prefix", func(a *berthv1alpha1.NetworkAttachment) { a.CIDR, a.Gateway = "fd00:1::/120", "fd00:1::1" }, "", ""},
		{"accepted without gateway", func(a *berthv1alpha1.NetworkAttachment) { a.Gateway = "" }, "", ""},
		{"accepted allow-listed bridge", func(a *berthv1alpha1.NetworkAttachment) { a.Master = "tenantbr" }, "", ""},
		{"accepted vlan on allowed parent", func(a *berthv1alpha1.NetworkAttachment) {
			a.LinkType, a.Parent, a.VLANID = berthv1alpha1.LinkVLAN, "ens9", ptr.To[int32](100)
		}, "", ""},
		{"16-character interface name", func(a *berthv1alpha1.NetworkAttachment) { a.Name = "abcdefghijklmnop" }, "spec.networkAttachments[0].name", "15"},
		{"unsafe interface charset", func(a *berthv1alpha1.NetworkAttachment) { a.Name = "net/1" }, "spec.networkAttachments[0].name", "must match"},
		{"eth0 reserved", func(a *berthv1alpha1.NetworkAttachment) { a.Name = "eth0" }, "spec.networkAttachments[0].name", "pod's own"},
		{"lo reserved", func(a *berthv1alpha1.NetworkAttachment) { a.Name = "lo" }, "spec.networkAttachments[0].name", "pod's own"},
		{"host eth0 as master", func(a *berthv1alpha1.NetworkAttachment) { a.Master = "eth0" }, "spec.networkAttachments[0].master", "host or CNI"},
		{"CNI bridge cni0 as master", func(a *berthv1alpha1.NetworkAttachment) { a.Master = "cni0" }, "spec.networkAttachments[0].master", "host or CNI"},
		{"cbr0 as master", func(a *berthv1alpha1.NetworkAttachment) { a.Master = "cbr0" }, "spec.networkAttachments[0].master", "host or CNI"},
		{"bridge outside prefix", func(a *berthv1alpha1.NetworkAttachment) { a.Master = "br-tenant" }, "spec.networkAttachments[0].master", "does not start with"},
		{"parent not allow-listed", func(a *berthv1alpha1.NetworkAttachment) {
			a.LinkType, a.Parent, a.VLANID = berthv1alpha1.LinkVLAN, "ens10", ptr.To[int32](100)
		}, "spec.networkAttachments[0].parent", "allowed parents"},
		{"host eth0 as parent", func(a *berthv1alpha1.NetworkAttachment) {
			a.LinkType, a.Parent, a.VLANID = berthv1alpha1.LinkVLAN, "eth0", ptr.To[int32](100)
		}, "spec.networkAttachments[0].parent", "host interface"},
		{"vlan without vlanID", func(a *berthv1alpha1.NetworkAttachment) { a.LinkType, a.Parent = berthv1alpha1.LinkVLAN, "ens9" }, "spec.networkAttachments[0].vlanID", "VLAN ID"},
		{"vlanID out of range", func(a *berthv1alpha1.NetworkAttachment) {
			a.LinkType, a.Parent, a.VLANID = berthv1alpha1.LinkVLAN, "ens9", ptr.To[int32](4095)
		}, "spec.networkAttachments[0].vlanID", "1..4094"},
		{"vlanID on veth", func(a *berthv1alpha1.NetworkAttachment) { a.VLANID = ptr.To[int32](5) }, "spec.networkAttachments[0].vlanID", "only valid"},
		{"parent on veth", func(a *berthv1alpha1.NetworkAttachment) { a.Parent = "ens9" }, "spec.networkAttachments[0].parent", "only valid"},
		{"unknown link type", func(a *berthv1alpha1.NetworkAttachment) { a.LinkType = "macvlan" }, "spec.networkAttachments[0].linkType", "Unsupported"},
		{"cidr does not parse", func(a *berthv1alpha1.NetworkAttachment) { a.CIDR = "192.168.100.0/33" }, "spec.networkAttachments[0].cidr", "must be a CIDR"},
		{"cidr host bits", func(a *berthv1alpha1.NetworkAttachment) { a.CIDR = "192.168.100.7/24" }, "spec.networkAttachments[0].cidr", "host bits"},
		{"cidr overlaps pod CIDR", func(a *berthv1alpha1.NetworkAttachment) { a.CIDR, a.Gateway = "10.244.3.0/24", "" }, "spec.networkAttachments[0].cidr", "overlaps the cluster's network 10.244.0.0/16"},
		{"cidr contains service CIDR", func(a *berthv1alpha1.NetworkAttachment) { a.CIDR, a.Gateway = "10.0.0.0/8", "" }, "spec.networkAttachments[0].cidr", "overlaps"},
		{"v6 cidr overlaps", func(a *berthv1alpha1.NetworkAttachment) { a.CIDR, a.Gateway = "fd00:10::/64", "" }, "spec.networkAttachments[0].cidr", "overlaps"},
		{"gateway outside cidr", func(a *berthv1alpha1.NetworkAttachment) { a.Gateway = "192.168.101.1" }, "spec.networkAttachments[0].gateway", "inside cidr"},
		{"gateway is network address", func(a *berthv1alpha1.NetworkAttachment) { a.Gateway = "192.168.100.0" }, "spec.networkAttachments[0].gateway", "network address"},
		{"gateway is broadcast", func(a *berthv1alpha1.NetworkAttachment) { a.Gateway = "192.168.100.255" }, "spec.networkAttachments[0].gateway", "broadcast"},
		{"gateway not an IP", func(a *berthv1alpha1.NetworkAttachment) { a.Gateway = "gw" }, "spec.networkAttachments[0].gateway", "IP address"},
		{"gateway of another family", func(a *berthv1alpha1.NetworkAttachment) { a.Gateway = "fd00::1" }, "spec.networkAttachments[0].gateway", "inside cidr"},
		{"route via outside cidr", func(a *berthv1alpha1.NetworkAttachment) {
			a.Routes = []berthv1alpha1.Route{{Destination: "172.16.0.0/16", Via: "172.16.0.1"}}
		}, "spec.networkAttachments[0].routes[0].via", "inside cidr"},
		{"route of another family", func(a *berthv1alpha1.NetworkAttachment) {
			a.Routes = []berthv1alpha1.Route{{Destination: "fd00:5::/64"}}
		}, "spec.networkAttachments[0].routes[0].destination", "family"},
		{"mtu too small", func(a *berthv1alpha1.NetworkAttachment) { a.MTU = ptr.To[int32](67) }, "spec.networkAttachments[0].mtu", "68"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := testPolicy.Validate(pcWith(tc.mutate))
			if tc.wantField == "" {
				if len(errs) != 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.wantField && strings.Contains(e.Error(), tc.wantMsg) {
					return
				}
			}
			t.Fatalf("want an error on %s containing %q, got %v", tc.wantField, tc.wantMsg, errs)
		})
	}
}

func TestValidateSpecDuplicates(t *testing.T) {
	pc := pcWith(nil)
	b := goodAttachment()
	pc.Spec.NetworkAttachments = append(pc.Spec.NetworkAttachments, b)
	errs := testPolicy.Validate(pc)
	var name, cidr bool
	for _, e := range errs {
		name = name || e.Field == "spec.networkAttachments[1].name"
		cidr = cidr || e.Field == "spec.networkAttachments[1].cidr"
	}
	if !name || !cidr {
		t.Fatalf("want duplicate name and same-network errors on [1], got %v", errs)
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
		{"cni0 allow-listed as bridge", Policy{BridgePrefix: "berth", AllowedBridges: []string{"cni0"}}, false},
		{"eth0 allow-listed as parent", Policy{BridgePrefix: "berth", AllowedParents: []string{"eth0"}}, false},
		{"lo allow-listed", Policy{BridgePrefix: "berth", AllowedBridges: []string{"lo"}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.Check(); (err == nil) != tc.ok {
				t.Fatalf("Check() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestValidateAgainst(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	mk := func(ns, name string, uid types.UID, ts metav1.Time, a berthv1alpha1.NetworkAttachment) berthv1alpha1.PodConfig {
		return berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, CreationTimestamp: ts},
			Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{a}}}
	}
	base := goodAttachment()
	otherCIDR := base
	otherCIDR.CIDR, otherCIDR.Gateway = "192.168.7.0/24", ""
	otherGW := base
	otherGW.Gateway = "192.168.100.254"
	otherBridge := otherCIDR
	otherBridge.Master = "berth1"
	cases := []struct {
		name      string
		older     berthv1alpha1.NetworkAttachment
		newer     berthv1alpha1.NetworkAttachment
		wantField string
	}{
		{"same network shared", base, base, ""},
		{"same bridge different cidr", base, otherCIDR, "spec.networkAttachments[0].cidr"},
		{"same network different gateway", base, otherGW, "spec.networkAttachments[0].gateway"},
		{"other bridge other cidr", base, otherBridge, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := mk("a", "old", "u-old", t0, tc.older)
			nw := mk("b", "new", "u-new", t1, tc.newer)
			all := []berthv1alpha1.PodConfig{old, nw}
			errs := ValidateAgainst(&nw, all)
			if tc.wantField == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
			} else if len(errs) != 1 || errs[0].Field != tc.wantField || !strings.Contains(errs[0].Error(), "a/old") {
				t.Fatalf("want one error on %s naming a/old, got %v", tc.wantField, errs)
			}
			// The older one is never refused because of the newer one.
			if errs := ValidateAgainst(&old, all); len(errs) > 0 {
				t.Fatalf("older refused: %v", errs)
			}
		})
	}
}

func TestNetworkName(t *testing.T) {
	p := netip.MustParsePrefix
	cases := []struct {
		name       string
		a, b       string
		pa, pb     netip.Prefix
		wantSame   bool
		wantPrefix string
	}{
		{"deterministic", "berth0", "berth0", p("192.168.1.0/24"), p("192.168.1.0/24"), true, "berth0-"},
		{"non-canonical cidr is the same network", "berth0", "berth0", p("192.168.1.9/24"), p("192.168.1.0/24"), true, "berth0-"},
		{"other cidr", "berth0", "berth0", p("192.168.1.0/24"), p("192.168.2.0/24"), false, "berth0-"},
		{"case differs", "Berth_A", "berth-a", p("10.1.0.0/24"), p("10.1.0.0/24"), false, "berth-a-"},
		{"v6", "berth6", "berth6", p("fd00::/64"), p("fd00:0::/64"), true, "berth6-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, y := NetworkName(tc.a, tc.pa), NetworkName(tc.b, tc.pb)
			if (x == y) != tc.wantSame {
				t.Fatalf("%s vs %s: same=%v, want %v", x, y, x == y, tc.wantSame)
			}
			if !strings.HasPrefix(x, tc.wantPrefix) || len(x) > 63 {
				t.Fatalf("name %q: want prefix %q and a DNS label", x, tc.wantPrefix)
			}
		})
	}
	if got := HostPeerName("uid-1", "net1"); len(got) > MaxInterfaceName || got == HostPeerName("uid-2", "net1") || got != HostPeerName("uid-1", "net1") {
		t.Fatalf("HostPeerName %q: must be ≤15 characters, stable, and differ between pods", got)
	}
}
