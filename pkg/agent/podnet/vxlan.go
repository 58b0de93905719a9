package podnet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/berth-sched/berth/pkg/podconfig"
)

// VXLANAliasPref starts the alias of every VXLAN link the agent creates ("berth-podconfig vxlan
// <parent>/<vni>"): `ip -d link` shows who made it and for which segment.
const VXLANAliasPref = "berth-podconfig vxlan "

// VXLANSpec is the VXLAN link a network with a VXLAN puts on its bridge (the parent is
// allow-listed by the policy).
type VXLANSpec = podconfig.VXLAN

// VXLANLinkName is the host name of the VXLAN link of vni on parent and port: "bx" and 13 hex
// digits of a hash of the three, within the kernel's 15 characters, the same on every agent
// start, and the agent's way to recognise its own link.
func VXLANLinkName(parent string, vni, port int) string {
	sum := sha256.Sum256([]byte(parent + "\x00" + strconv.Itoa(vni) + "\x00" + strconv.Itoa(port)))
	return "bx" + hex.EncodeToString(sum[:])[:13]
}

var vxlanNameRE = regexp.MustCompile(`^bx[0-9a-f]{13}$`)

// ownedVXLAN reports whether link is a VXLAN link the agent created: a vxlan link whose name is
// VXLANLinkName of its actual parent (by index in links), VNI and port, carrying the agent's
// mark and alias (or none yet: the kernel takes the alias after creation).
func ownedVXLAN(link netlink.Link, byIndex map[int]netlink.Link) bool {
	v, ok := link.(*netlink.Vxlan)
	if !ok || link.Type() != "vxlan" || !vxlanNameRE.MatchString(v.Name) {
		return false
	}
	parent, ok := byIndex[v.VtepDevIndex]
	if !ok || v.Name != VXLANLinkName(parent.Attrs().Name, v.VxlanId, v.Port) {
		return false
	}
	return Marked(link) && (v.Alias == "" || strings.HasPrefix(v.Alias, VXLANAliasPref))
}

// ownedUplink reports whether link is one of the agent's bridge uplinks (VLAN or VXLAN).
func ownedUplink(link netlink.Link, byIndex map[int]netlink.Link) bool {
	return ownedVLAN(link, byIndex) || ownedVXLAN(link, byIndex)
}

// findVXLAN looks in links for spec: the agent's own link to reuse, nil when there is none, or
// a ConflictError when something the agent did not create holds the VNI and port (the kernel
// keeps one per node) or the agent's name.
func findVXLAN(links []netlink.Link, spec VXLANSpec) (netlink.Link, error) {
	return findUplink(links, VXLANLinkName(spec.Parent, spec.VNI, spec.Port), fmt.Sprintf("VXLAN %d of %s", spec.VNI, spec.Parent),
		func(k netlink.Link) bool {
			v, ok := k.(*netlink.Vxlan)
			return ok && v.VxlanId == spec.VNI && v.Port == spec.Port
		}, ownedVXLAN, func(other string) string {
			return fmt.Sprintf("VXLAN %d (port %d) already exists on the node as %s, which Berth did not create (it is left alone)", spec.VNI, spec.Port, other)
		})
}

// ensureVXLAN makes the VXLAN link of spec exist (on parent, joined to the multicast group,
// learning peers' addresses from traffic), marked as the agent's, a port of br and up. The
// parent itself is never changed.
func (l *Links) ensureVXLAN(spec VXLANSpec, br netlink.Link) error {
	what := fmt.Sprintf("VXLAN %d of %s", spec.VNI, spec.Parent)
	parent, links, err := l.uplinkParent(spec.Parent, br, fmt.Sprintf("VXLAN %d", spec.VNI))
	if err != nil {
		return err
	}
	v, err := findVXLAN(links, spec)
	if err != nil {
		return err
	}
	name := VXLANLinkName(spec.Parent, spec.VNI, spec.Port)
	if v == nil {
		req := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: name, Group: LinkGroup},
			VxlanId: spec.VNI, VtepDevIndex: parent.Attrs().Index, Group: net.IP(spec.Group.AsSlice()),
			Port: spec.Port, Learning: true}
		if err := l.host.LinkAdd(req); err != nil {
			if errors.Is(err, syscall.EOPNOTSUPP) {
				return &UnsupportedError{Msg: fmt.Sprintf("cannot create %s: the node's kernel has no VXLAN support (load the vxlan module or use a kernel with CONFIG_VXLAN)", what)}
			}
			if errors.Is(err, syscall.EEXIST) {
				return &ConflictError{Msg: fmt.Sprintf("cannot create %s (%s): %v", name, what, err)}
			}
			return fmt.Errorf("creating %s (%s): %w", name, what, err)
		}
		if v, err = l.host.LinkByName(name); err != nil {
			return fmt.Errorf("VXLAN link %s after creation: %w", name, err)
		}
	}
	return l.joinBridge(v, VXLANAliasPref+spec.Parent+"/"+strconv.Itoa(spec.VNI), br, what)
}
