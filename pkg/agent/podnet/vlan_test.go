package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/berth-sched/berth/pkg/podconfig"
)

func TestVLANLinkName(t *testing.T) {
	seen := map[string]string{}
	for _, tc := range []struct {
		parent string
		id     int
	}{{"trunk0", 10}, {"trunk0", 11}, {"trunk1", 10}, {"a-very-long-nic", 4094}, {"eth1", 1}, {"trunk01", 0}} {
		n := VLANLinkName(tc.parent, tc.id)
		if len(n) > podconfig.MaxInterfaceName || !vlanNameRE.MatchString(n) {
			t.Errorf("%s.%d -> %q: not bv+13 hex within 15 characters", tc.parent, tc.id, n)
		}
		if n != VLANLinkName(tc.parent, tc.id) {
			t.Errorf("%s.%d: name not stable", tc.parent, tc.id)
		}
		key := fmt.Sprintf("%s.%d", tc.parent, tc.id)
		if prev, dup := seen[n]; dup {
			t.Errorf("%s and %s share the name %s", prev, key, n)
		}
		seen[n] = key
		// why: the host-peer and VLAN names must never be mistaken for each other.
		if IsHostPeerName(n) {
			t.Errorf("%s looks like a host peer", n)
		}
	}
}

// Link snapshots as the kernel reports them (no kernel needed): the decisions of ensureVLAN
// and the VLAN GC are functions of them.
func snapshot() (parent netlink.Link, ours, admins *netlink.Vlan, links []netlink.Link) {
	parent = &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Index: 2, Name: "trunk0"}}
	other := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Index: 3, Name: "trunk1"}}
	ours = &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Index: 10, Name: VLANLinkName("trunk0", 10), ParentIndex: 2, MasterIndex: 20, Group: LinkGroup,
		Alias: VLANAliasPref + "trunk0.10"}, VlanId: 10}
	admins = &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Index: 11, Name: "trunk0.30", ParentIndex: 2}, VlanId: 30}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Index: 20, Name: "berth-v10", Alias: BridgeAlias}}
	links = []netlink.Link{&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: 1, Name: "lo"}}, parent, other, ours, admins, br}
	return parent, ours, admins, links
}

func TestFindVLAN(t *testing.T) {
	parent, ours, _, links := snapshot()
	vlan := func(name string, parentIdx, id int, alias string) *netlink.Vlan {
		return &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Index: 50, Name: name, ParentIndex: parentIdx, Alias: alias, Group: LinkGroup}, VlanId: id}
	}
	for _, tc := range []struct {
		name     string
		links    []netlink.Link
		spec     VLANSpec
		wantLink string
		wantErr  string
	}{
		{name: "the agent's own link is reused", links: links, spec: VLANSpec{Parent: "trunk0", ID: 10}, wantLink: ours.Name},
		{name: "none yet: create", links: links, spec: VLANSpec{Parent: "trunk0", ID: 20}},
		{name: "an administrator's VLAN with that ID on the parent: conflict, named", links: links, spec: VLANSpec{Parent: "trunk0", ID: 30},
			wantErr: "VLAN 30 of trunk0 already exists as trunk0.30, which Berth did not create"},
		{name: "another link under the agent's name: conflict", spec: VLANSpec{Parent: "trunk0", ID: 40},
			links:   append(slices.Clone(links), &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Index: 51, Name: VLANLinkName("trunk0", 40)}}),
			wantErr: "a bridge named " + VLANLinkName("trunk0", 40) + " exists on the node and is not Berth's VLAN 40 of trunk0"},
		{name: "the agent's name with someone else's alias: not ours", spec: VLANSpec{Parent: "trunk0", ID: 40},
			links:   append(slices.Clone(links), vlan(VLANLinkName("trunk0", 40), 2, 40, "lab uplink")),
			wantErr: "which Berth did not create"},
		{name: "the agent's name and alias without the group: not ours", spec: VLANSpec{Parent: "trunk0", ID: 40},
			links: append(slices.Clone(links), func() netlink.Link {
				v := vlan(VLANLinkName("trunk0", 40), 2, 40, VLANAliasPref+"trunk0.40")
				v.Group = 0
				return v
			}()),
			wantErr: "which Berth did not create"},
		{name: "a crash between creation and alias: still ours", spec: VLANSpec{Parent: "trunk0", ID: 40},
			links:    append(slices.Clone(links), vlan(VLANLinkName("trunk0", 40), 2, 40, "")),
			wantLink: VLANLinkName("trunk0", 40)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findVLAN(tc.links, parent, tc.spec)
			if tc.wantErr != "" {
				var ce *ConflictError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want a conflict saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantLink == "" && got != nil:
				t.Errorf("found %s, want none", got.Attrs().Name)
			case tc.wantLink != "" && (got == nil || got.Attrs().Name != tc.wantLink):
				t.Errorf("found %v, want %s", got, tc.wantLink)
			}
		})
	}
}

func TestUnusedVLANs(t *testing.T) {
	_, ours, admins, links := snapshot()
	renamed := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Index: 12, Name: VLANLinkName("trunk9", 12), ParentIndex: 2, Group: LinkGroup, Alias: VLANAliasPref + "trunk9.12"}, VlanId: 12}
	links = append(links, renamed)
	names := func(ls []netlink.Link) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Attrs().Name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		keep map[string]bool
		want []string
	}{
		{name: "in use: kept", keep: map[string]bool{ours.Name: true}},
		// why: a name that is not the hash of the link's actual parent (renamed) is not
		// provably ours (its parent was renamed, or someone copied the pattern): left alone,
		// like the administrator's.
		{name: "unused: removed; the administrator's and the unprovable never", want: []string{ours.Name}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(unusedVLANs(links, tc.keep))
			if !slices.Equal(got, tc.want) {
				t.Errorf("unused %v, want %v (admin's %s, renamed %s)", got, tc.want, admins.Name, renamed.Name)
			}
		})
	}
}

// linkState is what an administrator cares about on the parent: nothing of it may change.
func linkState(t *testing.T, h *netlink.Handle, name string) string {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	a := l.Attrs()
	return fmt.Sprintf("index=%d type=%s mtu=%d flags=%v master=%d alias=%q addrs=%v", a.Index, l.Type(), a.MTU, a.Flags, a.MasterIndex, a.Alias, addrsOf(t, h, name))
}

// vlanSupported probes the kernel once, in a namespace of its own: 802.1Q is a kernel option
// (CONFIG_VLAN_8021Q, module 8021q), not something a test can install.
func vlanSupported(t *testing.T) bool {
	t.Helper()
	ns, _ := newNS(t)
	h := handle(t, ns)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probe0"}, PeerName: "probe1"}); err != nil {
		t.Fatal(err)
	}
	p, err := h.LinkByName("probe0")
	if err != nil {
		t.Fatal(err)
	}
	err = h.LinkAdd(&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "probe0.7", ParentIndex: p.Attrs().Index}, VlanId: 7})
	switch {
	case err == nil:
		return true
	case errors.Is(err, syscall.EOPNOTSUPP):
		return false
	default:
		t.Fatalf("probing 802.1Q support: %v", err)
		return false
	}
}

// node is a test "node": a network namespace with its agent's Links and a trunk interface (the
// allow-listed parent) that is one end of a veth wire to the other node's trunk.
type testNode struct {
	ns    netns.NsHandle
	h     *netlink.Handle
	links *Links
}

func newTestNode(t *testing.T) testNode {
	t.Helper()
	ns, _ := newNS(t)
	l, err := NewLinks(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return testNode{ns: ns, h: handle(t, ns), links: l}
}

func vlanAttachment(nsPath, uid, bridge, addr string, vlan int) Attachment {
	return Attachment{NetNS: nsPath, Interface: "vnet", HostPeer: podconfig.HostPeerName(uid, "vnet"), Bridge: bridge,
		Address: netip.MustParsePrefix(addr), Alias: "ns/pod-" + uid + " vnet", VLAN: &VLANSpec{Parent: "trunk0", ID: vlan}}
}

// udpReaches reports whether a datagram from inside from reaches to's listener on addr.
func udpReaches(t *testing.T, from, to netns.NsHandle, addr string) bool {
	t.Helper()
	var conn net.PacketConn
	inNS(t, to, func() {
		var err error
		if conn, err = net.ListenPacket("udp4", addr); err != nil {
			t.Fatal(err)
		}
	})
	defer conn.Close()
	got := make(chan bool, 1)
	go func() {
		buf := make([]byte, 16)
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, _, err := conn.ReadFrom(buf)
		got <- err == nil && string(buf[:n]) == "vlan"
	}()
	// why: the first datagrams may go while ARP resolves across the wire; send a few.
	inNS(t, from, func() {
		c, err := net.Dial("udp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i := 0; i < 5; i++ {
			_, _ = c.Write([]byte("vlan"))
			time.Sleep(100 * time.Millisecond)
		}
	})
	return <-got
}

// TestLinksVLAN runs the VLAN data path in namespaces the test creates: two "nodes" wired
// trunk0 <-> trunk0 by a veth (the allow-listed parent; this kernel may lack the dummy
// driver, and a dummy carries no traffic anyway), pods on VLAN 10 of both reach each other
// across the wire, a pod on VLAN 20 does not, and removal leaves each parent as it was. On a
// kernel without 802.1Q it proves the other half: a clear UnsupportedError, nothing made in
// the pod, nothing left on the node.
func TestLinksVLAN(t *testing.T) {
	needRoot(t)
	a, b := newTestNode(t), newTestNode(t)
	if err := a.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "trunk0"}, PeerName: "trunk0", PeerNamespace: netlink.NsFd(int(b.ns))}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []testNode{a, b} {
		l, err := n.h.LinkByName("trunk0")
		if err != nil {
			t.Fatal(err)
		}
		if err := n.h.LinkSetUp(l); err != nil { // the administrator's: up, no address
			t.Fatal(err)
		}
	}
	parentBefore := []string{linkState(t, a.h, "trunk0"), linkState(t, b.h, "trunk0")}
	linksBefore := [][]string{linkNames(t, a.h), linkNames(t, b.h)}
	podA1, pathA1 := newNS(t)
	podB1, pathB1 := newNS(t)
	a1 := vlanAttachment(pathA1, "uid-a1", "berth-v10", "192.168.88.2/24", 10)
	b1 := vlanAttachment(pathB1, "uid-b1", "berth-v10", "192.168.88.3/24", 10)
	vname := VLANLinkName("trunk0", 10)

	if !vlanSupported(t) {
		t.Log("this kernel has no 802.1Q support (CONFIG_VLAN_8021Q): proving the refusal; the tagged data path runs on kernels that have it")
		err := a.links.Apply(a1)
		var ue *UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no 802.1Q VLAN support") || !strings.Contains(err.Error(), "VLAN 10 of trunk0") {
			t.Fatalf("Apply on a kernel without 802.1Q: %v, want an UnsupportedError naming VLAN 10 of trunk0", err)
		}
		if got := linkNames(t, handle(t, podA1)); !slices.Equal(got, []string{"lo"}) {
			t.Errorf("pod links %v: something was made in the pod", got)
		}
		if _, err := a.h.LinkByName(a1.HostPeer); err == nil {
			t.Error("a host peer was made for the refused attachment")
		}
		// The bridge Apply made first goes with the GC once nothing needs it.
		if removed, err := a.links.RemoveUnusedVLANs(nil); err != nil || len(removed) != 0 {
			t.Errorf("VLAN GC removed %v, %v", removed, err)
		}
		if removed, err := a.links.RemoveUnusedBridges(nil); err != nil || !slices.Equal(removed, []string{"berth-v10"}) {
			t.Errorf("bridge GC removed %v, %v; want berth-v10", removed, err)
		}
		if got := linkNames(t, a.h); !slices.Equal(got, linksBefore[0]) {
			t.Errorf("node links %v, want %v", got, linksBefore[0])
		}
		if got := linkState(t, a.h, "trunk0"); got != parentBefore[0] {
			t.Errorf("parent changed:\n%s\n%s", parentBefore[0], got)
		}
		return
	}

	t.Run("VLAN 10 of the parent joins the bridge next to the pod's veth; again changes nothing", func(t *testing.T) {
		if err := a.links.Apply(a1); err != nil {
			t.Fatal(err)
		}
		if err := b.links.Apply(b1); err != nil {
			t.Fatal(err)
		}
		for _, n := range []testNode{a, b} {
			v, err := n.h.LinkByName(vname)
			if err != nil {
				t.Fatalf("VLAN link %s: %v", vname, err)
			}
			br, _ := n.h.LinkByName("berth-v10")
			parent, _ := n.h.LinkByName("trunk0")
			vl, ok := v.(*netlink.Vlan)
			if !ok || vl.VlanId != 10 || v.Attrs().ParentIndex != parent.Attrs().Index || v.Attrs().MasterIndex != br.Attrs().Index ||
				v.Attrs().Flags&net.FlagUp == 0 || v.Attrs().Alias != VLANAliasPref+"trunk0.10" {
				t.Errorf("VLAN link %+v (%T), want VLAN 10 of trunk0, port of berth-v10, up, marked", v.Attrs(), v)
			}
		}
		idx := func() int { v, _ := a.h.LinkByName(vname); return v.Attrs().Index }
		before := idx()
		if err := a.links.Apply(a1); err != nil {
			t.Fatal(err)
		}
		if idx() != before {
			t.Error("re-apply recreated the VLAN link")
		}
	})

	t.Run("two pods on VLAN 10 of two nodes reach each other across the trunk", func(t *testing.T) {
		if !udpReaches(t, podA1, podB1, "192.168.88.3:7777") {
			t.Fatal("no datagram from pod A1 to pod B1 over VLAN 10")
		}
	})

	t.Run("a pod on VLAN 20 of the same trunk is not reached", func(t *testing.T) {
		podB2, pathB2 := newNS(t)
		b2 := vlanAttachment(pathB2, "uid-b2", "berth-v20", "192.168.88.4/24", 20)
		if err := b.links.Apply(b2); err != nil {
			t.Fatal(err)
		}
		if udpReaches(t, podA1, podB2, "192.168.88.4:7777") {
			t.Error("a datagram crossed from VLAN 10 to VLAN 20")
		}
		if err := b.links.Remove(b2.HostPeer); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an administrator's VLAN on the parent is a conflict and stays", func(t *testing.T) {
		parent, _ := a.h.LinkByName("trunk0")
		if err := a.h.LinkAdd(&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "trunk0.30", ParentIndex: parent.Attrs().Index}, VlanId: 30}); err != nil {
			t.Fatal(err)
		}
		podA3, pathA3 := newNS(t)
		err := a.links.Apply(vlanAttachment(pathA3, "uid-a3", "berth-v30", "192.168.89.2/24", 30))
		var ce *ConflictError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "trunk0.30") {
			t.Fatalf("err %v, want a conflict naming trunk0.30", err)
		}
		if got := linkNames(t, handle(t, podA3)); !slices.Equal(got, []string{"lo"}) {
			t.Errorf("pod links %v after a conflict", got)
		}
		if removed, err := a.links.RemoveUnusedVLANs(map[string]bool{vname: true}); err != nil || len(removed) != 0 {
			t.Errorf("VLAN GC removed %v, %v; the administrator's must stay", removed, err)
		}
		if _, err := a.h.LinkByName("trunk0.30"); err != nil {
			t.Errorf("the administrator's VLAN is gone: %v", err)
		}
	})

	t.Run("one VLAN joins one bridge: a second network on VLAN 10 is a conflict", func(t *testing.T) {
		_, pathA4 := newNS(t)
		err := a.links.Apply(vlanAttachment(pathA4, "uid-a4", "berth-v10b", "192.168.90.2/24", 10))
		var ce *ConflictError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "already a port of bridge berth-v10") {
			t.Fatalf("err %v, want a conflict naming bridge berth-v10", err)
		}
	})

	t.Run("removal: the VLAN link goes exactly when unused, the parent stays as it was", func(t *testing.T) {
		if err := a.links.Remove(a1.HostPeer); err != nil {
			t.Fatal(err)
		}
		if removed, err := a.links.RemoveUnusedVLANs(map[string]bool{vname: true}); err != nil || len(removed) != 0 {
			t.Errorf("VLAN link removed while still in use: %v, %v", removed, err)
		}
		for i, n := range []testNode{a, b} {
			if i == 1 {
				if err := n.links.Remove(b1.HostPeer); err != nil {
					t.Fatal(err)
				}
			}
			want := []string{vname}
			if i == 1 {
				want = append(want, VLANLinkName("trunk0", 20)) // B2's, whose pod went earlier
			}
			removed, err := n.links.RemoveUnusedVLANs(nil)
			slices.Sort(removed)
			slices.Sort(want)
			if err != nil || !slices.Equal(removed, want) {
				t.Errorf("node %d: VLAN GC removed %v, %v; want %v", i, removed, err, want)
			}
			if _, err := n.links.RemoveUnusedBridges(nil); err != nil {
				t.Fatal(err)
			}
			if got := linkState(t, n.h, "trunk0"); got != parentBefore[i] {
				t.Errorf("node %d: parent changed:\n%s\n%s", i, parentBefore[i], got)
			}
		}
		if admin, err := a.h.LinkByName("trunk0.30"); err != nil || a.h.LinkDel(admin) != nil {
			t.Fatalf("the administrator's VLAN: %v", err)
		}
		for i, n := range []testNode{a, b} {
			if got := linkNames(t, n.h); !slices.Equal(got, linksBefore[i]) {
				t.Errorf("node %d links %v, want %v", i, got, linksBefore[i])
			}
		}
	})
}
