package podnet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/berth-sched/berth/pkg/podconfig"
)

// Marks on the host links the agent creates. The group is the mark the agent trusts: it is
// set in the very request that creates a link (IFLA_GROUP), so no crash can leave a link of the
// agent's without it, and `ip link show group 4877` lists every one. The alias, which the
// kernel takes only after creation, tells a human who made a link and for which pod. A link
// without the group is never enslaved into, re-addressed or deleted, whatever its name.
const (
	LinkGroup     = 4877
	BridgeAlias   = "berth-podconfig bridge"
	PeerAliasPref = "berth-podconfig "
)

// Marked reports whether link carries the agent's mark (LinkGroup).
func Marked(link netlink.Link) bool { return link.Attrs().Group == LinkGroup }

// hostPeerRE matches podconfig.HostPeerName.
var hostPeerRE = regexp.MustCompile(`^bp[0-9a-f]{13}$`)

// IsHostPeerName reports whether name has the shape of a host peer the agent creates.
func IsHostPeerName(name string) bool { return hostPeerRE.MatchString(name) }

// Attachment is one link to make: everything resolved from the PodNetwork, the IPAllocation
// and the runtime.
type Attachment struct {
	// NetNS is the pod sandbox's network namespace path.
	NetNS string
	// Interface is the name inside the pod; HostPeer the host end.
	Interface, HostPeer string
	// Bridge is the host bridge (created if missing, with Gateway/prefix on it).
	Bridge  string
	Gateway netip.Addr
	// Address is the pod's address with the network's prefix length.
	Address netip.Prefix
	MTU     int
	Routes  []RouteSpec
	// Alias describes the pod on the host peer (ns/pod attachment).
	Alias string
	// VLAN is the VLAN sub-interface of an allow-listed parent the agent enslaves to Bridge
	// next to the veth; nil for none.
	VLAN *VLANSpec
	// VXLAN is the VXLAN link over an allow-listed parent the agent enslaves to Bridge; nil
	// for none (a network has a VLAN or a VXLAN, not both).
	VXLAN *VXLANSpec
}

// RouteSpec is one route inside the pod through the interface; Via invalid = on-link.
type RouteSpec = podconfig.RouteSpec

// Dataplane makes and removes links. Links is the netlink one; tests of the executor use a
// fake.
type Dataplane interface {
	// Apply makes the attachment exist exactly (idempotent).
	Apply(a Attachment) error
	// Remove deletes the host peer (and with it the pod end); absent is not an error.
	Remove(hostPeer string) error
	// HostPeers lists host links named like a host peer (created by the agent).
	HostPeers() ([]string, error)
	// RemoveUnusedBridges deletes bridges the agent created that have no port and are not in
	// keep; it returns their names.
	RemoveUnusedBridges(keep map[string]bool) ([]string, error)
	// RemoveUnusedVLANs deletes VLAN sub-interfaces and VXLAN links the agent created whose
	// names (VLANLinkName, VXLANLinkName) are not in keep; it returns their names.
	RemoveUnusedVLANs(keep map[string]bool) ([]string, error)
	// HostRanges are the ranges of the addresses on the node's links the agent did not
	// create: the node's own networks, which no PodNetwork may overlap.
	HostRanges() ([]podconfig.NamedPrefix, error)
}

// NetNSError is a pod network namespace that cannot be entered (it vanished, or is not a
// namespace).
type NetNSError struct {
	Path string
	Err  error
}

func (e *NetNSError) Error() string {
	return fmt.Sprintf("pod network namespace %s: %v", e.Path, e.Err)
}
func (e *NetNSError) Unwrap() error { return e.Err }

// ConflictError is an interface in the pod that Berth did not make.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// Links is the netlink dataplane. Host is the node's network namespace (the agent's own with
// hostNetwork); every host-side operation goes through a handle opened in it, and every
// pod-side one through a handle opened in the pod's namespace, so no goroutine ever switches
// namespaces.
type Links struct {
	host   *netlink.Handle
	hostNS netns.NsHandle
}

// NewLinks opens handles in the host namespace hostNS (the caller keeps ownership of hostNS).
func NewLinks(hostNS netns.NsHandle) (*Links, error) {
	h, err := netlink.NewHandleAt(hostNS)
	if err != nil {
		return nil, fmt.Errorf("netlink in the host namespace: %w", err)
	}
	return &Links{host: h, hostNS: hostNS}, nil
}

// Close releases the handles.
func (l *Links) Close() { l.host.Close() }

func notFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, syscall.ENODEV)
}

// openNS opens the pod's namespace and refuses the host's own.
func (l *Links) openNS(path string) (netns.NsHandle, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return -1, &NetNSError{Path: path, Err: err}
	}
	if ns.Equal(l.hostNS) {
		ns.Close()
		return -1, &NetNSError{Path: path, Err: errors.New("is the node's own network namespace (host-network pod): refused")}
	}
	return ns, nil
}

// Apply implements Dataplane.
func (l *Links) Apply(a Attachment) error {
	br, err := l.ensureBridge(a.Bridge, a.Gateway, a.Address)
	if err != nil {
		return err
	}
	if a.VLAN != nil {
		// The VLAN first: a parent or kernel that cannot carry it fails the attachment before
		// anything is made in the pod.
		if err := l.ensureVLAN(*a.VLAN, br); err != nil {
			return err
		}
	}
	if a.VXLAN != nil {
		if err := l.ensureVXLAN(*a.VXLAN, br); err != nil {
			return err
		}
	}
	ns, err := l.openNS(a.NetNS)
	if err != nil {
		return err
	}
	defer ns.Close()
	pod, err := netlink.NewHandleAt(ns)
	if err != nil {
		return &NetNSError{Path: a.NetNS, Err: err}
	}
	defer pod.Close()

	peer, in, err := l.ensureVeth(a, ns, pod)
	if err != nil {
		return err
	}
	if err := l.configureHostEnd(a, peer, br); err != nil {
		return err
	}
	return configurePodEnd(a, pod, in)
}

// vethVerdict says what to do with the links found under the attachment's names (nil when
// absent): keep them (ours), refuse (a ConflictError naming the foreign link), or else create
// the pair.
func vethVerdict(a Attachment, peer, in netlink.Link) (ours bool, err error) {
	switch {
	case peer != nil && in != nil && peer.Type() == "veth" && in.Type() == "veth" && peer.Attrs().ParentIndex == in.Attrs().Index && Marked(peer):
		return true, nil
	case peer != nil && !Marked(peer):
		return false, &ConflictError{Msg: fmt.Sprintf("host link %s exists and was not created by Berth (no mark: group %d); it is left alone", a.HostPeer, LinkGroup)}
	case in != nil:
		return false, &ConflictError{Msg: fmt.Sprintf("interface %s already exists in the pod and is not Berth's veth (host peer %s)", a.Interface, a.HostPeer)}
	}
	return false, nil
}

// ensureVeth returns the attachment's veth pair, host end and pod end, creating it unless the
// pair already there is Berth's.
func (l *Links) ensureVeth(a Attachment, ns netns.NsHandle, pod *netlink.Handle) (peer, in netlink.Link, err error) {
	peer, perr := l.host.LinkByName(a.HostPeer)
	if perr != nil && !notFound(perr) {
		return nil, nil, fmt.Errorf("host peer %s: %w", a.HostPeer, perr)
	}
	in, ierr := pod.LinkByName(a.Interface)
	if ierr != nil && !notFound(ierr) {
		return nil, nil, &NetNSError{Path: a.NetNS, Err: ierr}
	}
	ours, err := vethVerdict(a, peer, in)
	if err != nil || ours {
		return peer, in, err
	}
	return l.createVeth(a, ns, pod, peer)
}

// createVeth creates the pair, first removing stalePeer: a host peer whose pod end is not in
// this sandbox (left from a sandbox that was recreated, or a kill between creation and the
// check).
func (l *Links) createVeth(a Attachment, ns netns.NsHandle, pod *netlink.Handle, stalePeer netlink.Link) (peer, in netlink.Link, err error) {
	if stalePeer != nil {
		if err := l.host.LinkDel(stalePeer); err != nil && !notFound(err) {
			return nil, nil, fmt.Errorf("removing stale host peer %s: %w", a.HostPeer, err)
		}
	}
	// One request creates both ends with the pod end already in the pod's namespace under
	// its final name: no temporary name on the host, nothing half-moved to clean after a
	// crash.
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a.HostPeer, MTU: a.MTU, Alias: PeerAliasPref + a.Alias, Group: LinkGroup},
		PeerName: a.Interface, PeerNamespace: netlink.NsFd(int(ns))}
	if err := l.host.LinkAdd(v); err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return nil, nil, &ConflictError{Msg: fmt.Sprintf("cannot create %s/%s: %v", a.HostPeer, a.Interface, err)}
		}
		return nil, nil, &NetNSError{Path: a.NetNS, Err: fmt.Errorf("creating veth %s/%s: %w", a.HostPeer, a.Interface, err)}
	}
	// The kernel ignores the alias in the creation request; the group already marks the link
	// as Berth's, the alias tells a human whose it is.
	if p, lerr := l.host.LinkByName(a.HostPeer); lerr == nil {
		_ = l.host.LinkSetAlias(p, PeerAliasPref+a.Alias)
	}
	if peer, err = l.host.LinkByName(a.HostPeer); err != nil {
		return nil, nil, fmt.Errorf("host peer %s after creation: %w", a.HostPeer, err)
	}
	if in, err = pod.LinkByName(a.Interface); err != nil {
		_ = l.host.LinkDel(peer)
		return nil, nil, &NetNSError{Path: a.NetNS, Err: fmt.Errorf("pod end %s after creation: %w", a.Interface, err)}
	}
	return peer, in, nil
}

// configureHostEnd sets the host end's MTU, makes it a port of br and sets it up.
func (l *Links) configureHostEnd(a Attachment, peer, br netlink.Link) error {
	if a.MTU > 0 && peer.Attrs().MTU != a.MTU {
		if err := l.host.LinkSetMTU(peer, a.MTU); err != nil {
			return fmt.Errorf("MTU of %s: %w", a.HostPeer, err)
		}
	}
	if peer.Attrs().MasterIndex != br.Attrs().Index {
		if err := l.host.LinkSetMaster(peer, br); err != nil {
			return fmt.Errorf("enslaving %s to %s: %w", a.HostPeer, a.Bridge, err)
		}
	}
	if err := l.host.LinkSetUp(peer); err != nil {
		return fmt.Errorf("setting %s up: %w", a.HostPeer, err)
	}
	return nil
}

// configurePodEnd sets the pod end's MTU, exactly the allocated address of its family, sets it
// up and replaces its routes.
func configurePodEnd(a Attachment, pod *netlink.Handle, in netlink.Link) error {
	if a.MTU > 0 && in.Attrs().MTU != a.MTU {
		if err := pod.LinkSetMTU(in, a.MTU); err != nil {
			return &NetNSError{Path: a.NetNS, Err: fmt.Errorf("MTU of %s: %w", a.Interface, err)}
		}
	}
	if err := setOnlyAddress(pod, in, a.Address); err != nil {
		return &NetNSError{Path: a.NetNS, Err: err}
	}
	if err := pod.LinkSetUp(in); err != nil {
		return &NetNSError{Path: a.NetNS, Err: fmt.Errorf("setting %s up: %w", a.Interface, err)}
	}
	for _, r := range a.Routes {
		rt := &netlink.Route{LinkIndex: in.Attrs().Index, Dst: ipNet(r.Dst)}
		if r.Via.IsValid() {
			rt.Gw = net.IP(r.Via.AsSlice())
		} else {
			rt.Scope = netlink.SCOPE_LINK
		}
		if err := pod.RouteReplace(rt); err != nil {
			return &NetNSError{Path: a.NetNS, Err: fmt.Errorf("route %s via %v on %s: %w", r.Dst, r.Via, a.Interface, err)}
		}
	}
	return nil
}

func family(p netip.Prefix) int {
	if p.Addr().Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// setOnlyAddress leaves exactly want among the link's global addresses of its family (an
// address from an earlier allocation goes).
func setOnlyAddress(h *netlink.Handle, link netlink.Link, want netip.Prefix) error {
	addrs, err := h.AddrList(link, family(want))
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return fmt.Errorf("addresses of %s: %w", link.Attrs().Name, err)
	}
	have := false
	for _, ad := range addrs {
		p, ok := prefixOf(ad.IPNet)
		if !ok || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		if p == want {
			have = true
			continue
		}
		if err := h.AddrDel(link, &ad); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			return fmt.Errorf("removing %s from %s: %w", p, link.Attrs().Name, err)
		}
	}
	if have {
		return nil
	}
	ad := &netlink.Addr{IPNet: ipNet(want)}
	if want.Addr().Is6() {
		// No duplicate address detection delay: the address is the allocator's, unique by
		// construction, and traffic should flow at once.
		ad.Flags = syscall.IFA_F_NODAD
	}
	if err := h.AddrAdd(link, ad); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("adding %s to %s: %w", want, link.Attrs().Name, err)
	}
	return nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

// ensureBridge returns the bridge, creating it (marked) if missing, and puts the gateway on
// it. A link of that name Berth did not create, or a bridge of Berth's that carries an address
// or a port Berth did not put there, is refused by name and left as it is.
func (l *Links) ensureBridge(name string, gw netip.Addr, addr netip.Prefix) (netlink.Link, error) {
	br, err := l.host.LinkByName(name)
	switch {
	case err == nil:
		if br.Type() != "bridge" || !Marked(br) {
			return nil, &ConflictError{Msg: fmt.Sprintf("bridge %s: a %s of that name exists on the node and was not created by Berth (no mark: group %d); it is never joined or changed", name, br.Type(), LinkGroup)}
		}
		if err := l.foreign(br, gw, addr.Bits()); err != nil {
			return nil, err
		}
	case notFound(err):
		if br, err = l.createBridge(name); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("bridge %s: %w", name, err)
	}
	if gw.IsValid() {
		want := netip.PrefixFrom(gw, addr.Bits())
		addrs, err := l.host.AddrList(br, family(want))
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, fmt.Errorf("addresses of %s: %w", name, err)
		}
		have := false
		for _, ad := range addrs {
			if p, ok := prefixOf(ad.IPNet); ok && p == want {
				have = true
			}
		}
		if !have {
			ad := &netlink.Addr{IPNet: ipNet(want)}
			if want.Addr().Is6() {
				ad.Flags = syscall.IFA_F_NODAD
			}
			if err := l.host.AddrAdd(br, ad); err != nil && !errors.Is(err, syscall.EEXIST) {
				return nil, fmt.Errorf("gateway %s on %s: %w", want, name, err)
			}
		}
	}
	if br.Attrs().Flags&net.FlagUp == 0 {
		if err := l.host.LinkSetUp(br); err != nil {
			return nil, fmt.Errorf("setting %s up: %w", name, err)
		}
	}
	return br, nil
}

// createBridge creates the bridge under a temporary name, marks it with BridgeAlias and only
// then gives it its name (the kernel ignores an alias in the creation request): a crash at any
// point leaves either a marked bridge the GC knows or a temporary one it sweeps, never an
// unmarked bridge under the PodConfig's name that would look like an administrator's.
func (l *Links) createBridge(name string) (netlink.Link, error) {
	tmp := TempBridgeName(name)
	if old, err := l.host.LinkByName(tmp); err == nil {
		_ = l.host.LinkDel(old)
	}
	if err := l.host.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: tmp, Group: LinkGroup}}); err != nil {
		return nil, fmt.Errorf("creating bridge %s: %w", name, err)
	}
	br, err := l.host.LinkByName(tmp)
	if err == nil {
		err = l.host.LinkSetAlias(br, BridgeAlias)
	}
	if err == nil {
		err = l.host.LinkSetName(br, name)
	}
	if err != nil {
		_ = l.host.LinkDel(br)
		if errors.Is(err, syscall.EEXIST) {
			return l.host.LinkByName(name) // another writer made it meanwhile
		}
		return nil, fmt.Errorf("creating bridge %s: %w", name, err)
	}
	return l.host.LinkByName(name)
}

// TempBridgeName is the name a bridge has while it is being created.
func TempBridgeName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "bt" + hex.EncodeToString(sum[:])[:13]
}

var tempBridgeRE = regexp.MustCompile(`^bt[0-9a-f]{13}$`)

// Remove implements Dataplane.
func (l *Links) Remove(hostPeer string) error {
	if !IsHostPeerName(hostPeer) {
		return fmt.Errorf("refusing to remove %q: not a host peer name", hostPeer)
	}
	link, err := l.host.LinkByName(hostPeer)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if link.Type() != "veth" || !Marked(link) {
		return fmt.Errorf("refusing to remove %s: a %s without Berth's mark (group %d)", hostPeer, link.Type(), LinkGroup)
	}
	if err := l.host.LinkDel(link); err != nil && !notFound(err) {
		return fmt.Errorf("removing %s: %w", hostPeer, err)
	}
	return nil
}

func (l *Links) list() ([]netlink.Link, error) {
	for i := 0; ; i++ {
		links, err := l.host.LinkList()
		if err == nil || (!errors.Is(err, netlink.ErrDumpInterrupted) || i == 4) {
			return links, err
		}
	}
}

// HostPeers implements Dataplane.
func (l *Links) HostPeers() ([]string, error) {
	links, err := l.list()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range links {
		if k.Type() == "veth" && IsHostPeerName(k.Attrs().Name) && Marked(k) {
			out = append(out, k.Attrs().Name)
		}
	}
	return out, nil
}

// RemoveUnusedBridges implements Dataplane.
func (l *Links) RemoveUnusedBridges(keep map[string]bool) ([]string, error) {
	links, err := l.list()
	if err != nil {
		return nil, err
	}
	ports := map[int]int{}
	for _, k := range links {
		if m := k.Attrs().MasterIndex; m > 0 {
			ports[m]++
		}
	}
	var removed []string
	var errs []error
	for _, k := range links {
		a := k.Attrs()
		ours := Marked(k) && (a.Alias == BridgeAlias || tempBridgeRE.MatchString(a.Name))
		if k.Type() != "bridge" || !ours || keep[a.Name] || ports[a.Index] > 0 {
			continue
		}
		if err := l.host.LinkDel(k); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("removing bridge %s: %w", a.Name, err))
			continue
		}
		removed = append(removed, a.Name)
	}
	return removed, errors.Join(errs...)
}

// vanished reports whether err says the pod's namespace went away (the pod stopped).
func vanished(err error) bool {
	var ne *NetNSError
	return errors.As(err, &ne) && (errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.EINVAL))
}

// foreign refuses a bridge of Berth's that carries what Berth did not put there: a global
// address other than the network's gateway, or a port that is not one of the agent's host
// peers or VLAN or VXLAN links. Someone else uses it; joining a tenant's pod to it would join theirs.
func (l *Links) foreign(br netlink.Link, gw netip.Addr, bits int) error {
	name := br.Attrs().Name
	addrs, err := l.host.AddrList(br, netlink.FAMILY_ALL)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return fmt.Errorf("addresses of %s: %w", name, err)
	}
	for _, ad := range addrs {
		p, ok := prefixOf(ad.IPNet)
		if !ok || p.Addr().IsLinkLocalUnicast() || (gw.IsValid() && p == netip.PrefixFrom(gw, bits)) {
			continue
		}
		return &ConflictError{Msg: fmt.Sprintf("bridge %s carries address %s, which Berth did not put there; refused", name, p)}
	}
	links, err := l.list()
	if err != nil {
		return fmt.Errorf("listing host links: %w", err)
	}
	byIndex := indexLinks(links)
	for _, k := range links {
		if k.Attrs().MasterIndex != br.Attrs().Index {
			continue
		}
		peer := k.Type() == "veth" && IsHostPeerName(k.Attrs().Name) && Marked(k)
		if !peer && !ownedUplink(k, byIndex) {
			return &ConflictError{Msg: fmt.Sprintf("bridge %s has port %s, which Berth did not add; refused", name, k.Attrs().Name)}
		}
	}
	return nil
}

// HostRanges implements Dataplane.
func (l *Links) HostRanges() ([]podconfig.NamedPrefix, error) {
	links, err := l.list()
	if err != nil {
		return nil, err
	}
	var out []podconfig.NamedPrefix
	for _, k := range links {
		if Marked(k) {
			continue
		}
		addrs, err := l.host.AddrList(k, netlink.FAMILY_ALL)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, fmt.Errorf("addresses of %s: %w", k.Attrs().Name, err)
		}
		for _, ad := range addrs {
			p, ok := prefixOf(ad.IPNet)
			if !ok || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() {
				continue // the never ranges cover them
			}
			out = append(out, podconfig.NamedPrefix{Prefix: p.Masked(), Name: "the node's network on " + k.Attrs().Name})
		}
	}
	return out, nil
}
