package podnet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/berth-sched/berth/pkg/podconfig"
)

// VLANAliasPref starts the alias of every VLAN sub-interface the agent creates ("berth-podconfig
// vlan <parent>.<id>"): `ip -d link` shows who made it and for which VLAN.
const VLANAliasPref = "berth-podconfig vlan "

// VLANSpec is the VLAN sub-interface a network with a VLAN puts on its bridge (the parent is
// allow-listed by the policy).
type VLANSpec = podconfig.VLAN

// VLANLinkName is the host name of the VLAN sub-interface ID of parent: "bv" and 13 hex digits
// of a hash of both. <parent>.<id> can reach 20 characters; the hash keeps the name within the
// kernel's 15, is the same on every agent start, and lets the agent recognise its own link
// (the name must be the hash of the link's actual parent and VLAN ID).
func VLANLinkName(parent string, id int) string {
	sum := sha256.Sum256([]byte(parent + "\x00" + strconv.Itoa(id)))
	return "bv" + hex.EncodeToString(sum[:])[:13]
}

var vlanNameRE = regexp.MustCompile(`^bv[0-9a-f]{13}$`)

// UnsupportedError is a link the node's kernel cannot make (no 802.1Q support).
type UnsupportedError struct{ Msg string }

func (e *UnsupportedError) Error() string { return e.Msg }

// ownedVLAN reports whether link is a VLAN sub-interface the agent created: a vlan link whose
// name is VLANLinkName of its actual parent (looked up by index in links) and VLAN ID, carrying
// the agent's alias (or none: the kernel takes the alias only after creation, so a crash in
// between leaves it empty). An administrator's VLAN never matches, whatever it is called.
func ownedVLAN(link netlink.Link, byIndex map[int]netlink.Link) bool {
	v, ok := link.(*netlink.Vlan)
	if !ok || link.Type() != "vlan" || !vlanNameRE.MatchString(v.Name) {
		return false
	}
	parent, ok := byIndex[v.ParentIndex]
	if !ok || v.Name != VLANLinkName(parent.Attrs().Name, v.VlanId) {
		return false
	}
	return Marked(link) && (v.Alias == "" || strings.HasPrefix(v.Alias, VLANAliasPref))
}

func indexLinks(links []netlink.Link) map[int]netlink.Link {
	m := make(map[int]netlink.Link, len(links))
	for _, k := range links {
		m[k.Attrs().Index] = k
	}
	return m
}

// findVLAN looks in links (the host's) for VLAN spec on parent: the agent's own link to reuse,
// nil when there is none yet, or a ConflictError when something the agent did not create is
// in the way (an administrator's VLAN with that ID on that parent, which the kernel would not
// let exist twice, or another link under the agent's name).
func findVLAN(links []netlink.Link, parent netlink.Link, spec VLANSpec) (netlink.Link, error) {
	return findUplink(links, VLANLinkName(spec.Parent, spec.ID), fmt.Sprintf("VLAN %d of %s", spec.ID, spec.Parent),
		func(k netlink.Link) bool {
			v, ok := k.(*netlink.Vlan)
			return ok && k.Attrs().ParentIndex == parent.Attrs().Index && v.VlanId == spec.ID
		}, ownedVLAN, func(other string) string {
			return fmt.Sprintf("VLAN %d of %s already exists as %s, which Berth did not create (it is left alone)", spec.ID, spec.Parent, other)
		})
}

// findUplink looks in links for the agent's uplink link named name: it returns the link when
// the one that is the same (same says so) is the agent's own under that name, nil when there
// is none, and a ConflictError when another link is the same (taken says how, naming it) or
// holds the name (what names the uplink).
func findUplink(links []netlink.Link, name, what string, same func(netlink.Link) bool,
	owned func(netlink.Link, map[int]netlink.Link) bool, taken func(other string) string) (netlink.Link, error) {
	byIndex := indexLinks(links)
	for _, k := range links {
		a := k.Attrs()
		isSame := same(k)
		switch {
		case isSame && a.Name == name && owned(k, byIndex):
			return k, nil
		case isSame:
			return nil, &ConflictError{Msg: taken(a.Name)}
		case a.Name == name:
			return nil, &ConflictError{Msg: fmt.Sprintf("a %s named %s exists on the node and is not Berth's %s", k.Type(), name, what)}
		}
	}
	return nil, nil
}

// ensureVLAN makes the VLAN sub-interface of spec exist, marked as the agent's, enslaved to
// the bridge br and up. The parent itself is never changed (not its state, MTU, addresses or
// master): a parent that is down leaves the VLAN without carrier, which is the administrator's
// call.
func (l *Links) ensureVLAN(spec VLANSpec, br netlink.Link) error {
	parent, links, err := l.uplinkParent(spec.Parent, br, fmt.Sprintf("VLAN %d", spec.ID))
	if err != nil {
		return err
	}
	v, err := findVLAN(links, parent, spec)
	if err != nil {
		return err
	}
	name := VLANLinkName(spec.Parent, spec.ID)
	alias := VLANAliasPref + spec.Parent + "." + strconv.Itoa(spec.ID)
	if v == nil {
		req := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: parent.Attrs().Index, Group: LinkGroup},
			VlanId: spec.ID, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q}
		if err := l.host.LinkAdd(req); err != nil {
			if errors.Is(err, syscall.EOPNOTSUPP) {
				return &UnsupportedError{Msg: fmt.Sprintf("cannot create VLAN %d of %s: the node's kernel has no 802.1Q VLAN support (load the 8021q module or use a kernel with CONFIG_VLAN_8021Q)", spec.ID, spec.Parent)}
			}
			if errors.Is(err, syscall.EEXIST) {
				return &ConflictError{Msg: fmt.Sprintf("cannot create %s (VLAN %d of %s): %v", name, spec.ID, spec.Parent, err)}
			}
			return fmt.Errorf("creating %s (VLAN %d of %s): %w", name, spec.ID, spec.Parent, err)
		}
		if v, err = l.host.LinkByName(name); err != nil {
			return fmt.Errorf("VLAN link %s after creation: %w", name, err)
		}
	}
	return l.joinBridge(v, alias, br, fmt.Sprintf("VLAN %d of %s", spec.ID, spec.Parent))
}

// uplinkParent looks up the parent of an uplink link (what names it in errors) and lists the
// host's links; the parent must exist and not be the attachment's bridge br.
func (l *Links) uplinkParent(name string, br netlink.Link, what string) (netlink.Link, []netlink.Link, error) {
	parent, err := l.host.LinkByName(name)
	if notFound(err) {
		return nil, nil, fmt.Errorf("parent %s of %s does not exist on the node", name, what)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("parent %s: %w", name, err)
	}
	if parent.Attrs().Index == br.Attrs().Index {
		return nil, nil, &ConflictError{Msg: fmt.Sprintf("parent %s is the attachment's bridge itself", name)}
	}
	links, err := l.list()
	if err != nil {
		return nil, nil, fmt.Errorf("listing host links: %w", err)
	}
	return parent, links, nil
}

// joinBridge marks the agent's uplink port link (a VLAN or VXLAN link named for what) with
// alias, makes it a port of br and sets it up. One uplink link is one bridge port: two
// networks (bridges) on one VLAN or VXLAN would bridge them together.
func (l *Links) joinBridge(v netlink.Link, alias string, br netlink.Link, what string) error {
	name := v.Attrs().Name
	if v.Attrs().Alias != alias {
		if err := l.host.LinkSetAlias(v, alias); err != nil {
			return fmt.Errorf("marking %s: %w", name, err)
		}
	}
	switch m := v.Attrs().MasterIndex; {
	case m == br.Attrs().Index:
	case m != 0:
		other := strconv.Itoa(m)
		if ml, err := l.host.LinkByIndex(m); err == nil {
			other = ml.Attrs().Name
		}
		return &ConflictError{Msg: fmt.Sprintf("%s (%s) is already a port of bridge %s; it joins one bridge", what, name, other)}
	default:
		if err := l.host.LinkSetMaster(v, br); err != nil {
			return fmt.Errorf("enslaving %s to %s: %w", name, br.Attrs().Name, err)
		}
	}
	if err := l.host.LinkSetUp(v); err != nil {
		return fmt.Errorf("setting %s up: %w", name, err)
	}
	return nil
}

// RemoveUnusedVLANs implements Dataplane: it deletes the VLAN sub-interfaces and VXLAN links
// the agent created whose names are not in keep, and returns them. A link the agent did not
// create is never touched, nor is any parent.
func (l *Links) RemoveUnusedVLANs(keep map[string]bool) ([]string, error) {
	links, err := l.list()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, k := range unusedVLANs(links, keep) {
		if err := l.host.LinkDel(k); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("removing VLAN link %s: %w", k.Attrs().Name, err))
			continue
		}
		removed = append(removed, k.Attrs().Name)
	}
	return removed, errors.Join(errs...)
}

// unusedVLANs are the agent's VLAN and VXLAN links among links that keep does not name.
func unusedVLANs(links []netlink.Link, keep map[string]bool) []netlink.Link {
	byIndex := indexLinks(links)
	var out []netlink.Link
	for _, k := range links {
		if ownedUplink(k, byIndex) && !keep[k.Attrs().Name] {
			out = append(out, k)
		}
	}
	return out
}
