package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/berth-sched/berth/pkg/podconfig"
)

// needRoot: these tests create network namespaces and links, which needs CAP_NET_ADMIN and
// CAP_SYS_ADMIN. CI runs as root; without it they fail with the fix, and skip only when the
// user explicitly leaves privileged tests out (the e2e suites' BERTH_SKIP_REAL_NODE=1).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("BERTH_SKIP_REAL_NODE") == "1" {
		t.Skip("SKIPPED under BERTH_SKIP_REAL_NODE=1: needs root to create network namespaces")
	}
	t.Fatal("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces and links: run `go test` as root")
}

// newNS creates a network namespace the test owns; closing the handle (at cleanup) destroys it
// and every link in it, so nothing outlives the test.
func newNS(t *testing.T) (netns.NsHandle, string) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns, fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(ns))
}

// inNS runs f on a thread inside ns.
func inNS(t *testing.T, ns netns.NsHandle, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(err) // a thread left in a test namespace must not run anything else
		}
	}()
	f()
}

func handle(t *testing.T, ns netns.NsHandle) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func addrsOf(t *testing.T, h *netlink.Handle, name string) []string {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	as, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		if p, ok := prefixOf(a.IPNet); ok && !p.Addr().IsLinkLocalUnicast() {
			out = append(out, p.String())
		}
	}
	slices.Sort(out)
	return out
}

func linkNames(t *testing.T, h *netlink.Handle) []string {
	t.Helper()
	ls, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.Attrs().Name)
	}
	slices.Sort(out)
	return out
}

func attachment(nsPath, uid, iface string, addr string) Attachment {
	return Attachment{NetNS: nsPath, Interface: iface, HostPeer: podconfig.HostPeerName(uid, iface), Bridge: "berth-t0",
		Gateway: netip.MustParseAddr("192.168.77.1"), Address: netip.MustParsePrefix(addr), MTU: 1400,
		Routes: []RouteSpec{{Dst: netip.MustParsePrefix("10.77.0.0/16"), Via: netip.MustParseAddr("192.168.77.1")}},
		Alias:  "ns/pod-" + uid + " " + iface}
}

func TestLinks(t *testing.T) {
	needRoot(t)
	hostNS, _ := newNS(t)
	host := handle(t, hostNS)
	l, err := NewLinks(hostNS)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	podA, pathA := newNS(t)
	podB, pathB := newNS(t)
	ha, hb := handle(t, podA), handle(t, podB)
	a := attachment(pathA, "uid-a", "net1", "192.168.77.2/24")
	b := attachment(pathB, "uid-b", "net1", "192.168.77.3/24")

	t.Run("apply makes bridge, gateway, veth, address, MTU, route; again changes nothing", func(t *testing.T) {
		for _, at := range []Attachment{a, b} {
			if err := l.Apply(at); err != nil {
				t.Fatal(err)
			}
		}
		br, err := host.LinkByName("berth-t0")
		if err != nil {
			t.Fatal(err)
		}
		if br.Type() != "bridge" || br.Attrs().Alias != BridgeAlias || !Marked(br) || br.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("bridge %s alias %q group %d flags %v", br.Type(), br.Attrs().Alias, br.Attrs().Group, br.Attrs().Flags)
		}
		if got := addrsOf(t, host, "berth-t0"); !slices.Equal(got, []string{"192.168.77.1/24"}) {
			t.Errorf("bridge addresses %v", got)
		}
		peer, err := host.LinkByName(a.HostPeer)
		if err != nil {
			t.Fatal(err)
		}
		if peer.Attrs().MasterIndex != br.Attrs().Index || peer.Attrs().MTU != 1400 || peer.Attrs().Alias != PeerAliasPref+a.Alias || !Marked(peer) {
			t.Errorf("host peer master %d (bridge %d) mtu %d alias %q group %d", peer.Attrs().MasterIndex, br.Attrs().Index, peer.Attrs().MTU, peer.Attrs().Alias, peer.Attrs().Group)
		}
		in, err := ha.LinkByName("net1")
		if err != nil {
			t.Fatal(err)
		}
		if in.Attrs().MTU != 1400 || in.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("pod end mtu %d flags %v", in.Attrs().MTU, in.Attrs().Flags)
		}
		if got := addrsOf(t, ha, "net1"); !slices.Equal(got, []string{"192.168.77.2/24"}) {
			t.Errorf("pod addresses %v", got)
		}
		routes, err := ha.RouteList(in, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range routes {
			if r.Dst != nil && r.Dst.String() == "10.77.0.0/16" && r.Gw.String() == "192.168.77.1" {
				found = true
			}
		}
		if !found {
			t.Errorf("route 10.77.0.0/16 via 192.168.77.1 missing: %+v", routes)
		}
		idx := in.Attrs().Index
		if err := l.Apply(a); err != nil {
			t.Fatal(err)
		}
		again, _ := ha.LinkByName("net1")
		if again.Attrs().Index != idx {
			t.Errorf("re-apply recreated the pod end (index %d -> %d)", idx, again.Attrs().Index)
		}
	})

	t.Run("the two pods exchange UDP over the bridge", func(t *testing.T) {
		var conn net.PacketConn
		inNS(t, podB, func() {
			var err error
			if conn, err = net.ListenPacket("udp4", "192.168.77.3:7777"); err != nil {
				t.Fatal(err)
			}
		})
		defer conn.Close()
		inNS(t, podA, func() {
			c, err := net.Dial("udp4", "192.168.77.3:7777")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
		})
		buf := make([]byte, 16)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no datagram from pod A over the bridge: %v", err)
		}
		if string(buf[:n]) != "hello" || from.(*net.UDPAddr).IP.String() != "192.168.77.2" {
			t.Errorf("got %q from %v", buf[:n], from)
		}
	})

	t.Run("a new allocation replaces the old address", func(t *testing.T) {
		moved := a
		moved.Address = netip.MustParsePrefix("192.168.77.9/24")
		if err := l.Apply(moved); err != nil {
			t.Fatal(err)
		}
		if got := addrsOf(t, ha, "net1"); !slices.Equal(got, []string{"192.168.77.9/24"}) {
			t.Errorf("pod addresses %v", got)
		}
		if err := l.Apply(a); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a stale host peer without its pod end is replaced", func(t *testing.T) {
		podC, pathC := newNS(t)
		c := attachment(pathC, "uid-c", "net1", "192.168.77.4/24")
		// why: a host peer of that name whose other end lives elsewhere, as after a sandbox
		// was recreated while the old namespace is still held open.
		elsewhere, _ := newNS(t)
		if err := host.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: c.HostPeer, Group: LinkGroup}, PeerName: "x", PeerNamespace: netlink.NsFd(int(elsewhere))}); err != nil {
			t.Fatal(err)
		}
		if err := l.Apply(c); err != nil {
			t.Fatal(err)
		}
		if _, err := handle(t, podC).LinkByName("net1"); err != nil {
			t.Errorf("pod end not created: %v", err)
		}
		if err := l.Remove(c.HostPeer); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a host link under a peer's name without Berth's mark is refused, never deleted", func(t *testing.T) {
		_, pathG := newNS(t)
		g := attachment(pathG, "uid-g", "net1", "192.168.77.8/24")
		elsewhere, _ := newNS(t)
		if err := host.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: g.HostPeer}, PeerName: "x", PeerNamespace: netlink.NsFd(int(elsewhere))}); err != nil {
			t.Fatal(err)
		}
		var ce *ConflictError
		if err := l.Apply(g); !errors.As(err, &ce) || !strings.Contains(err.Error(), "not created by Berth") {
			t.Fatalf("err %v, want a ConflictError saying it is not Berth's", err)
		}
		if err := l.Remove(g.HostPeer); err == nil {
			t.Error("Remove deleted an unmarked link")
		}
		if peers, _ := l.HostPeers(); slices.Contains(peers, g.HostPeer) {
			t.Error("the sweep would see an unmarked link as a host peer")
		}
		if _, err := host.LinkByName(g.HostPeer); err != nil {
			t.Fatalf("the unmarked link is gone: %v", err)
		}
		if err := host.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: g.HostPeer}}); err != nil {
			t.Fatal(err)
		}
	})

	// The attacks on the node's own bridges: a network named after a bridge the agent did not
	// make (the CNI's), or a Berth bridge someone else has put an address or a port on.
	t.Run("bridges the agent did not make, or that carry what it did not put there, are refused untouched", func(t *testing.T) {
		if err := host.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "berth-cni"}}); err != nil {
			t.Fatal(err)
		}
		cni, _ := host.LinkByName("berth-cni")
		if err := host.AddrAdd(cni, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("10.244.0.1/24"))}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name    string
			bridge  string
			prepare func()
			wantErr string
		}{
			{"the CNI's bridge by its name", "berth-cni", func() {}, "bridge berth-cni: a bridge of that name exists on the node and was not created by Berth"},
			{"a Berth bridge with a foreign address", "berth-t0", func() {
				br, _ := host.LinkByName("berth-t0")
				if err := host.AddrAdd(br, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("10.9.9.9/32"))}); err != nil {
					t.Fatal(err)
				}
			}, "bridge berth-t0 carries address 10.9.9.9/32, which Berth did not put there"},
			{"a Berth bridge with a foreign port", "berth-t0", func() {
				br, _ := host.LinkByName("berth-t0")
				_ = host.AddrDel(br, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("10.9.9.9/32"))})
				elsewhere, _ := newNS(t)
				if err := host.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "intruder0", MasterIndex: br.Attrs().Index}, PeerName: "x", PeerNamespace: netlink.NsFd(int(elsewhere))}); err != nil {
					t.Fatal(err)
				}
			}, "bridge berth-t0 has port intruder0, which Berth did not add"},
		} {
			tc.prepare()
			_, pathH := newNS(t)
			at := attachment(pathH, "uid-"+tc.name, "net1", "192.168.77.9/24")
			at.Bridge = tc.bridge
			var ce *ConflictError
			if err := l.Apply(at); !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want a ConflictError containing %q", tc.name, err, tc.wantErr)
			}
			if _, err := host.LinkByName(at.HostPeer); err == nil {
				t.Errorf("%s: a host peer was made", tc.name)
			}
		}
		if got := addrsOf(t, host, "berth-cni"); !slices.Equal(got, []string{"10.244.0.1/24"}) {
			t.Errorf("the CNI bridge's addresses changed: %v", got)
		}
		ranges, err := l.HostRanges()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range ranges {
			names = append(names, r.String())
		}
		if !slices.Contains(names, "the node's network on berth-cni 10.244.0.0/24") || slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "192.168.77") }) {
			t.Errorf("host ranges %v: want the CNI bridge's and none of Berth's own bridges", names)
		}
		for _, n := range []string{"intruder0", "berth-cni"} {
			if k, err := host.LinkByName(n); err == nil {
				_ = host.LinkDel(k)
			}
		}
	})

	t.Run("an interface in the pod that is not Berth's is a conflict, untouched", func(t *testing.T) {
		podD, pathD := newNS(t)
		hd := handle(t, podD)
		// why: any link the pod has under the attachment's name (a bridge here: this kernel
		// may lack the dummy driver).
		if err := hd.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "net1"}}); err != nil {
			t.Fatal(err)
		}
		err := l.Apply(attachment(pathD, "uid-d", "net1", "192.168.77.5/24"))
		var ce *ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("err %v, want a ConflictError", err)
		}
		if d, err := hd.LinkByName("net1"); err != nil || d.Type() != "bridge" {
			t.Errorf("the pod's own interface was touched: %v %v", d, err)
		}
		if _, err := host.LinkByName(podconfig.HostPeerName("uid-d", "net1")); err == nil {
			t.Error("a host peer was left for the conflicting attachment")
		}
	})

	t.Run("a namespace that vanished is reported as such and leaves no host peer", func(t *testing.T) {
		podE, pathE := newNS(t)
		podE.Close() // the sandbox stopped between the runtime's answer and the apply
		err := l.Apply(attachment(pathE, "uid-e", "net1", "192.168.77.6/24"))
		if !vanished(err) {
			t.Fatalf("err %v, want a vanished namespace", err)
		}
		if _, err := host.LinkByName(podconfig.HostPeerName("uid-e", "net1")); err == nil {
			t.Error("a host peer was left")
		}
	})

	t.Run("the node's own namespace is refused", func(t *testing.T) {
		err := l.Apply(attachment(fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(hostNS)), "uid-h", "net1", "192.168.77.7/24"))
		var ne *NetNSError
		if !errors.As(err, &ne) {
			t.Fatalf("err %v, want a refusal", err)
		}
	})

	t.Run("a master that is not a bridge is a conflict", func(t *testing.T) {
		elsewhere, _ := newNS(t)
		if err := host.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "berth-dummy"}, PeerName: "y", PeerNamespace: netlink.NsFd(int(elsewhere))}); err != nil {
			t.Fatal(err)
		}
		at := a
		at.Bridge = "berth-dummy"
		var ce *ConflictError
		if err := l.Apply(at); !errors.As(err, &ce) {
			t.Fatalf("err %v, want a ConflictError", err)
		}
	})

	t.Run("host peers, removal, and only unused Berth bridges go", func(t *testing.T) {
		if err := host.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "admin-br"}}); err != nil {
			t.Fatal(err)
		}
		peers, err := l.HostPeers()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(peers)
		want := []string{a.HostPeer, b.HostPeer}
		slices.Sort(want)
		if !slices.Equal(peers, want) {
			t.Errorf("host peers %v, want %v", peers, want)
		}
		if removed, err := l.RemoveUnusedBridges(nil); err != nil || len(removed) != 0 {
			t.Errorf("bridge with ports removed: %v %v", removed, err)
		}
		for _, p := range want {
			if err := l.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := l.Remove(p); err != nil {
				t.Fatalf("second removal: %v", err)
			}
		}
		if _, err := ha.LinkByName("net1"); err == nil {
			t.Error("pod end survived its host peer")
		}
		if removed, err := l.RemoveUnusedBridges(map[string]bool{"berth-t0": true}); err != nil || len(removed) != 0 {
			t.Errorf("kept bridge removed: %v %v", removed, err)
		}
		// why: a crash between creating a bridge and naming it leaves the temporary name.
		if err := host.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: TempBridgeName("berth-x"), Group: LinkGroup}}); err != nil {
			t.Fatal(err)
		}
		removed, err := l.RemoveUnusedBridges(nil)
		slices.Sort(removed)
		if err != nil || !slices.Equal(removed, []string{"berth-t0", TempBridgeName("berth-x")}) {
			t.Errorf("removed %v, %v; want berth-t0 and the temporary bridge", removed, err)
		}
		if err := l.Remove("eth0"); err == nil {
			t.Error("Remove accepted a name that is not a host peer's")
		}
		if got := linkNames(t, host); !slices.Equal(got, []string{"admin-br", "lo"}) {
			t.Errorf("host links left %v, want only the admin's bridge and lo", got)
		}
		_ = hb
	})

	t.Run("IPv6 attachment", func(t *testing.T) {
		podF, pathF := newNS(t)
		at := Attachment{NetNS: pathF, Interface: "net6", HostPeer: podconfig.HostPeerName("uid-f", "net6"), Bridge: "berth-t6",
			Gateway: netip.MustParseAddr("fd00:77::1"), Address: netip.MustParsePrefix("fd00:77::2/64")}
		if err := l.Apply(at); err != nil {
			t.Fatal(err)
		}
		if got := addrsOf(t, handle(t, podF), "net6"); !slices.Equal(got, []string{"fd00:77::2/64"}) {
			t.Errorf("pod addresses %v", got)
		}
		if err := l.Remove(at.HostPeer); err != nil {
			t.Fatal(err)
		}
		if removed, err := l.RemoveUnusedBridges(nil); err != nil || !slices.Equal(removed, []string{"berth-t6"}) {
			t.Errorf("removed %v %v", removed, err)
		}
	})
}
