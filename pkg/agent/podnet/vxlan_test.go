package podnet

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/berth-sched/berth/pkg/podconfig"
)

func TestVXLANLinkName(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range []struct {
		parent     string
		vni, port  int
		vlanTwinID int
	}{{"eth0", 10, 4789, 10}, {"eth0", 11, 4789, 11}, {"eth0", 10, 8472, 10}, {"eth1", 10, 4789, 10}, {"a-very-long-nic", 16777215, 65535, 4094}} {
		n := VXLANLinkName(tc.parent, tc.vni, tc.port)
		if len(n) > podconfig.MaxInterfaceName || !vxlanNameRE.MatchString(n) || n != VXLANLinkName(tc.parent, tc.vni, tc.port) {
			t.Errorf("%s/%d:%d -> %q: not a stable bx+13 hex within 15 characters", tc.parent, tc.vni, tc.port, n)
		}
		if seen[n] {
			t.Errorf("%s/%d:%d: name %s taken twice", tc.parent, tc.vni, tc.port, n)
		}
		seen[n] = true
		// why: the agent tells its links apart by name; a VXLAN must never pass for a VLAN or a peer.
		if IsHostPeerName(n) || vlanNameRE.MatchString(n) || n == VLANLinkName(tc.parent, tc.vlanTwinID) {
			t.Errorf("%s looks like a host peer or VLAN link", n)
		}
	}
}

// Link snapshots as the kernel reports them: the decisions of ensureVXLAN and the GC.
func TestFindVXLAN(t *testing.T) {
	parent := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Index: 2, Name: "eth0"}}
	ours := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Index: 10, Name: VXLANLinkName("eth0", 100, 4789), Group: LinkGroup,
		Alias: VXLANAliasPref + "eth0/100"}, VxlanId: 100, VtepDevIndex: 2, Port: 4789}
	admins := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Index: 11, Name: "vxlan300"}, VxlanId: 300, VtepDevIndex: 2, Port: 4789}
	links := []netlink.Link{&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: 1, Name: "lo"}}, parent, ours, admins}
	spec := func(vni, port int) VXLANSpec {
		return VXLANSpec{Parent: "eth0", VNI: vni, Group: netip.MustParseAddr("239.1.1.1"), Port: port}
	}
	for _, tc := range []struct {
		name     string
		links    []netlink.Link
		spec     VXLANSpec
		wantLink string
		wantErr  string
	}{
		{name: "the agent's own link is reused", links: links, spec: spec(100, 4789), wantLink: ours.Name},
		{name: "none yet: create", links: links, spec: spec(200, 4789)},
		{name: "same VNI on another port is another segment: create", links: links, spec: spec(300, 8472)},
		{name: "an administrator's VXLAN with that VNI and port: conflict, named", links: links, spec: spec(300, 4789),
			wantErr: "VXLAN 300 (port 4789) already exists on the node as vxlan300, which Berth did not create"},
		{name: "another link under the agent's name: conflict", spec: spec(400, 4789),
			links:   append(slices.Clone(links), &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Index: 51, Name: VXLANLinkName("eth0", 400, 4789)}}),
			wantErr: "a bridge named " + VXLANLinkName("eth0", 400, 4789) + " exists on the node and is not Berth's VXLAN 400 of eth0"},
		{name: "the agent's name without the mark: not ours", spec: spec(400, 4789),
			links: append(slices.Clone(links), &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Index: 52, Name: VXLANLinkName("eth0", 400, 4789)},
				VxlanId: 400, VtepDevIndex: 2, Port: 4789}),
			wantErr: "which Berth did not create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findVXLAN(tc.links, tc.spec)
			switch {
			case tc.wantErr != "":
				var ce *ConflictError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want a conflict containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.wantLink == "" && got != nil:
				t.Fatalf("found %s, want none (create)", got.Attrs().Name)
			case tc.wantLink != "" && (got == nil || got.Attrs().Name != tc.wantLink):
				t.Fatalf("found %v, want %s", got, tc.wantLink)
			}
		})
	}
	// The GC takes the agent's VXLAN link when unused, never the administrator's.
	if got := unusedVLANs(links, nil); len(got) != 1 || got[0].Attrs().Name != ours.Name {
		t.Errorf("unused uplinks %v, want only %s", got, ours.Name)
	}
	if got := unusedVLANs(links, map[string]bool{ours.Name: true}); len(got) != 0 {
		t.Errorf("unused uplinks %v while kept", got)
	}
}

func vxlanAttachment(nsPath, uid, bridge, addr string, vni int) Attachment {
	return Attachment{NetNS: nsPath, Interface: "vnet", HostPeer: podconfig.HostPeerName(uid, "vnet"), Bridge: bridge,
		Address: netip.MustParsePrefix(addr), Alias: "ns/pod-" + uid + " vnet", MTU: 1400,
		VXLAN: &VXLANSpec{Parent: "trunk0", VNI: vni, Group: netip.MustParseAddr("239.1.1.1"), Port: podconfig.DefaultVXLANPort}}
}

// Two nodes joined by an addressed uplink: pods on one VXLAN reach each other across it, a pod on
// another VNI does not, and removal leaves both nodes' links and the parents as they were.
func TestLinksVXLAN(t *testing.T) {
	needRoot(t)
	a, b := newTestNode(t), newTestNode(t)
	if err := a.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "trunk0"}, PeerName: "trunk0", PeerNamespace: netlink.NsFd(int(b.ns))}); err != nil {
		t.Fatal(err)
	}
	for i, n := range []testNode{a, b} {
		l, err := n.h.LinkByName("trunk0")
		if err != nil {
			t.Fatal(err)
		}
		// The administrator's underlay: up, addressed (the VXLAN's local end).
		addr, _ := netlink.ParseAddr([]string{"10.99.0.1/24", "10.99.0.2/24"}[i])
		if err := n.h.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
		if err := n.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	parentBefore := []string{linkState(t, a.h, "trunk0"), linkState(t, b.h, "trunk0")}
	linksBefore := [][]string{linkNames(t, a.h), linkNames(t, b.h)}
	podA1, pathA1 := newNS(t)
	podB1, pathB1 := newNS(t)
	a1 := vxlanAttachment(pathA1, "uid-a1", "berth-x100", "192.168.98.2/24", 100)
	b1 := vxlanAttachment(pathB1, "uid-b1", "berth-x100", "192.168.98.3/24", 100)
	xname := VXLANLinkName("trunk0", 100, podconfig.DefaultVXLANPort)

	t.Run("VXLAN 100 over the parent joins the bridge next to the pod's veth; again changes nothing", func(t *testing.T) {
		if err := a.links.Apply(a1); err != nil {
			t.Fatal(err)
		}
		if err := b.links.Apply(b1); err != nil {
			t.Fatal(err)
		}
		for _, n := range []testNode{a, b} {
			v, err := n.h.LinkByName(xname)
			if err != nil {
				t.Fatalf("VXLAN link %s: %v", xname, err)
			}
			br, _ := n.h.LinkByName("berth-x100")
			parent, _ := n.h.LinkByName("trunk0")
			vx, ok := v.(*netlink.Vxlan)
			if !ok || vx.VxlanId != 100 || vx.VtepDevIndex != parent.Attrs().Index || !vx.Group.Equal(net.ParseIP("239.1.1.1")) ||
				vx.Port != podconfig.DefaultVXLANPort || v.Attrs().MasterIndex != br.Attrs().Index || v.Attrs().Flags&net.FlagUp == 0 ||
				v.Attrs().Alias != VXLANAliasPref+"trunk0/100" || !Marked(v) {
				t.Errorf("VXLAN link %+v (%T), want VXLAN 100 of trunk0 in 239.1.1.1:4789, port of berth-x100, up, marked", v.Attrs(), v)
			}
		}
		idx := func() int { v, _ := a.h.LinkByName(xname); return v.Attrs().Index }
		before := idx()
		if err := a.links.Apply(a1); err != nil {
			t.Fatal(err)
		}
		if idx() != before {
			t.Error("re-apply recreated the VXLAN link")
		}
	})

	t.Run("two pods on VXLAN 100 of two nodes reach each other across the underlay", func(t *testing.T) {
		if !udpReaches(t, podA1, podB1, "192.168.98.3:7777") || !udpReaches(t, podB1, podA1, "192.168.98.2:7777") {
			t.Fatal("no datagram between pods A1 and B1 over VXLAN 100")
		}
	})

	t.Run("a pod on VXLAN 200 of the same underlay is not reached", func(t *testing.T) {
		podB2, pathB2 := newNS(t)
		if err := b.links.Apply(vxlanAttachment(pathB2, "uid-b2", "berth-x200", "192.168.98.4/24", 200)); err != nil {
			t.Fatal(err)
		}
		if udpReaches(t, podA1, podB2, "192.168.98.4:7777") {
			t.Error("a datagram crossed from VXLAN 100 to VXLAN 200")
		}
		if err := b.links.Remove(podconfig.HostPeerName("uid-b2", "vnet")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("one VXLAN joins one bridge: a second network on VXLAN 100 is a conflict", func(t *testing.T) {
		_, pathA4 := newNS(t)
		err := a.links.Apply(vxlanAttachment(pathA4, "uid-a4", "berth-x100b", "192.168.97.2/24", 100))
		var ce *ConflictError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "already a port of bridge berth-x100") {
			t.Fatalf("err %v, want a conflict naming bridge berth-x100", err)
		}
	})

	t.Run("removal: the VXLAN links go exactly when unused, the parents stay as they were", func(t *testing.T) {
		if err := a.links.Remove(a1.HostPeer); err != nil {
			t.Fatal(err)
		}
		if removed, err := a.links.RemoveUnusedVLANs(map[string]bool{xname: true}); err != nil || len(removed) != 0 {
			t.Errorf("VXLAN link removed while still in use: %v, %v", removed, err)
		}
		if err := b.links.Remove(b1.HostPeer); err != nil {
			t.Fatal(err)
		}
		for i, n := range []testNode{a, b} {
			want := []string{xname}
			if i == 1 {
				want = append(want, VXLANLinkName("trunk0", 200, podconfig.DefaultVXLANPort))
			}
			removed, err := n.links.RemoveUnusedVLANs(nil)
			slices.Sort(removed)
			slices.Sort(want)
			if err != nil || !slices.Equal(removed, want) {
				t.Errorf("node %d: GC removed %v, %v; want %v", i, removed, err, want)
			}
			if _, err := n.links.RemoveUnusedBridges(nil); err != nil {
				t.Fatal(err)
			}
			if got := linkState(t, n.h, "trunk0"); got != parentBefore[i] {
				t.Errorf("node %d: parent changed:\n%s\n%s", i, parentBefore[i], got)
			}
			if got := linkNames(t, n.h); !slices.Equal(got, linksBefore[i]) {
				t.Errorf("node %d links %v, want %v", i, got, linksBefore[i])
			}
		}
	})
}
