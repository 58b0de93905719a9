package podconfig

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// DefaultBridgePrefix is what every PodNetwork bridge must start with (operator and agent
// flag --podconfig-bridge-prefix, chart podConfig.bridgePrefix).
const DefaultBridgePrefix = "berth"

// ValidateSpec checks a PodConfig spec (the CRD's CEL rules say the same where CEL can; this
// is the authority, run by the operator before it allocates and by the agent before it acts).
func ValidateSpec(spec *berthv1alpha1.PodConfigSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.PodSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.PodSelector,
			metav1validation.LabelSelectorValidationOptions{}, path.Child("podSelector"))...)
	}
	ap := path.Child("networkAttachments")
	if len(spec.NetworkAttachments) == 0 {
		errs = append(errs, field.Required(ap, "at least one attachment"))
	}
	if len(spec.NetworkAttachments) > 8 {
		errs = append(errs, field.TooMany(ap, len(spec.NetworkAttachments), 8))
	}
	names, networks := map[string]bool{}, map[string]string{}
	for i := range spec.NetworkAttachments {
		a := &spec.NetworkAttachments[i]
		p := ap.Index(i)
		switch {
		case len(a.Name) > MaxInterfaceName:
			errs = append(errs, field.TooLong(p.Child("name"), a.Name, MaxInterfaceName))
		case !attachmentNameRE.MatchString(a.Name):
			errs = append(errs, field.Invalid(p.Child("name"), a.Name, "must match ^[a-z][a-z0-9-]{0,14}$ (an interface name inside the pod)"))
		}
		for _, r := range ReservedPodInterfaces {
			if a.Name == r {
				errs = append(errs, field.Invalid(p.Child("name"), a.Name, "eth0 and lo are the pod's own interfaces"))
			}
		}
		if names[a.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), a.Name))
		}
		names[a.Name] = true
		if a.Network == "" {
			errs = append(errs, field.Required(p.Child("network"), "the name of a PodNetwork that grants this namespace"))
		} else if other, ok := networks[a.Network]; ok {
			errs = append(errs, field.Invalid(p.Child("network"), a.Network,
				fmt.Sprintf("attachment %q already joins network %s; one pod gets one address per network", other, a.Network)))
		}
		networks[a.Network] = a.Name
	}
	return errs
}

// NamedPrefix is a range with what it is, for refusal messages.
type NamedPrefix struct {
	Prefix netip.Prefix
	Name   string
}

func (n NamedPrefix) String() string { return n.Name + " " + n.Prefix.String() }

// NeverRanges are never a pod network or a route through an attachment, on any cluster: a
// tenant's pod that answered for them would take over the node's loopback, its route to the
// cloud metadata service, multicast or the unspecified address.
var NeverRanges = []NamedPrefix{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (with the cloud metadata address 169.254.169.254)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (and broadcast)"},
}

// minBits is the widest prefix a network or a route through an attachment may have: wider
// is a default route or half the address space, which always belongs to the pod's own network.
const minBits = 8

// overlapping returns the first of ranges that overlaps p.
func overlapping(p netip.Prefix, ranges []NamedPrefix) (NamedPrefix, bool) {
	for _, r := range ranges {
		if r.Prefix.Addr().Is4() == p.Addr().Is4() && r.Prefix.Overlaps(p) {
			return r, true
		}
	}
	return NamedPrefix{}, false
}

// ValidateNetworkSpec checks what a PodNetwork spec must meet on any cluster, the never
// ranges included (the CRD's CEL says the same where CEL can).
func ValidateNetworkSpec(spec *berthv1alpha1.PodNetworkSpec, path *field.Path) field.ErrorList {
	errs := validateBridge(spec.Bridge, path.Child("bridge"))
	errs = append(errs, metav1validation.ValidateLabelSelector(&spec.NamespaceSelector,
		metav1validation.LabelSelectorValidationOptions{}, path.Child("namespaceSelector"))...)
	if spec.MTU != nil && (*spec.MTU < 68 || *spec.MTU > 65535) {
		errs = append(errs, field.Invalid(path.Child("mtu"), *spec.MTU, "must be 68..65535"))
	}
	errs = append(errs, validateVLAN(spec.VLAN, spec.Bridge, path.Child("vlan"))...)
	errs = append(errs, validateVXLAN(spec.VXLAN, spec.Bridge, path.Child("vxlan"))...)
	if spec.VLAN != nil && spec.VXLAN != nil {
		errs = append(errs, field.Forbidden(path.Child("vxlan"), "a network carries a VLAN or a VXLAN, not both"))
	}
	prefix, cidrErrs, ok := validateCIDR(spec.CIDR, path.Child("cidr"))
	errs = append(errs, cidrErrs...)
	if !ok {
		return errs
	}
	if spec.Gateway != "" {
		errs = append(errs, validateGateway(spec.Gateway, prefix, path.Child("gateway"))...)
	}
	for j, r := range spec.Routes {
		errs = append(errs, validateRoute(r, prefix, path.Child("routes").Index(j))...)
	}
	return errs
}

// validateBridge wants a host interface name that is not a host or CNI interface.
func validateBridge(bridge string, bp *field.Path) field.ErrorList {
	switch {
	case !bridgeNameRE.MatchString(bridge):
		return field.ErrorList{field.Invalid(bp, bridge, "must match ^[a-z][a-z0-9-]{0,14}$ (a host interface name)")}
	case IsHostInterface(bridge):
		return field.ErrorList{field.Forbidden(bp, fmt.Sprintf("%s is a host or CNI interface, never a PodNetwork bridge", bridge))}
	}
	return nil
}

// validateVLAN wants a VLAN id and a parent link other than the network's own bridge.
func validateVLAN(v *berthv1alpha1.PodNetworkVLAN, bridge string, vp *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	if v.ID < 1 || v.ID > 4094 {
		errs = append(errs, field.Invalid(vp.Child("id"), v.ID, "must be 1..4094"))
	}
	if msg := validateHostLinkName(v.Parent); msg != "" {
		errs = append(errs, field.Invalid(vp.Child("parent"), v.Parent, msg))
	} else if v.Parent == bridge {
		errs = append(errs, field.Invalid(vp.Child("parent"), v.Parent, "cannot be the network's own bridge"))
	}
	return errs
}

// validateVXLAN wants a VNI, a parent link other than the network's own bridge, an IPv4
// multicast group outside the link-local control block, and a port.
func validateVXLAN(v *berthv1alpha1.PodNetworkVXLAN, bridge string, vp *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	if v.VNI < 1 || v.VNI > 1<<24-1 {
		errs = append(errs, field.Invalid(vp.Child("vni"), v.VNI, "must be 1..16777215"))
	}
	if msg := validateHostLinkName(v.Parent); msg != "" {
		errs = append(errs, field.Invalid(vp.Child("parent"), v.Parent, msg))
	} else if v.Parent == bridge {
		errs = append(errs, field.Invalid(vp.Child("parent"), v.Parent, "cannot be the network's own bridge"))
	}
	if g, err := netip.ParseAddr(v.Group); err != nil || !g.Is4() || !g.IsMulticast() || g.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(vp.Child("group"), v.Group, "must be an IPv4 multicast group outside 224.0.0.0/24 (link-local control), e.g. 239.1.1.1"))
	}
	if v.Port < 0 || v.Port > 65535 {
		errs = append(errs, field.Invalid(vp.Child("port"), v.Port, "must be 1..65535 (0: the default 4789)"))
	}
	return errs
}

// validateCIDR parses the network's range. ok is false when it cannot be read at all, and the
// checks that depend on it are skipped; prefix is masked.
func validateCIDR(cidr string, cp *field.Path) (prefix netip.Prefix, errs field.ErrorList, ok bool) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return prefix, field.ErrorList{field.Invalid(cp, cidr, "must be a CIDR such as 192.168.100.0/24 or fd00:1::/64")}, false
	}
	if prefix.Addr().Is4In6() || prefix.Addr().Zone() != "" {
		return prefix, field.ErrorList{field.Invalid(cp, cidr, "IPv4-mapped IPv6 and zoned addresses are not supported")}, false
	}
	if prefix.Masked() != prefix {
		errs = append(errs, field.Invalid(cp, cidr, fmt.Sprintf("must be the network address (%s); host bits are set", prefix.Masked())))
	}
	prefix = prefix.Masked()
	if prefix.Bits() < minBits {
		errs = append(errs, field.Forbidden(cp, fmt.Sprintf("%s is wider than a /%d: a default route or half the address space is never a pod network", prefix, minBits)))
	} else if r, bad := overlapping(prefix, NeverRanges); bad {
		errs = append(errs, field.Forbidden(cp, fmt.Sprintf("%s overlaps %s: never a pod network", prefix, r)))
	}
	return prefix, errs, true
}

// validateGateway wants an address of prefix that leaves room for pods.
func validateGateway(gateway string, prefix netip.Prefix, gp *field.Path) field.ErrorList {
	g, err := netip.ParseAddr(gateway)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(gp, gateway, "must be an IP address")}
	case !prefix.Contains(g):
		return field.ErrorList{field.Invalid(gp, gateway, fmt.Sprintf("must be inside cidr %s", prefix))}
	case hasNetworkAddress(prefix) && g == prefix.Addr():
		return field.ErrorList{field.Invalid(gp, gateway, "cannot be the network address")}
	case hasBroadcast(prefix) && g == lastAddr(prefix):
		return field.ErrorList{field.Invalid(gp, gateway, "cannot be the broadcast address")}
	case Usable(prefix, g).Sign() == 0:
		return field.ErrorList{field.Invalid(gp, gateway, "leaves no address for pods")}
	}
	return nil
}

// validateRoute wants a destination of prefix's family that is neither a default route nor a
// range never routed, via an address of prefix.
func validateRoute(r berthv1alpha1.Route, prefix netip.Prefix, rp *field.Path) field.ErrorList {
	var errs field.ErrorList
	d, err := netip.ParsePrefix(r.Destination)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(rp.Child("destination"), r.Destination, "must be a CIDR"))
	case d.Addr().Is4() != prefix.Addr().Is4():
		errs = append(errs, field.Invalid(rp.Child("destination"), r.Destination, "must be of the cidr's address family"))
	case d.Masked().Bits() < minBits:
		errs = append(errs, field.Forbidden(rp.Child("destination"), fmt.Sprintf("%s is a default route (or wider than a /%d): the pod's own network carries it, never an attachment", d.Masked(), minBits)))
	default:
		if n, bad := overlapping(d.Masked(), NeverRanges); bad {
			errs = append(errs, field.Forbidden(rp.Child("destination"), fmt.Sprintf("%s overlaps %s: never routed through an attachment", d.Masked(), n)))
		}
	}
	if r.Via != "" {
		v, err := netip.ParseAddr(r.Via)
		if err != nil {
			errs = append(errs, field.Invalid(rp.Child("via"), r.Via, "must be an IP address"))
		} else if !prefix.Contains(v) {
			errs = append(errs, field.Invalid(rp.Child("via"), r.Via, fmt.Sprintf("must be inside cidr %s (directly reachable)", prefix)))
		}
	}
	return errs
}

// Policy is what the cluster administrator allows beyond the PodNetworks themselves (operator
// and agent flags --podconfig-*, chart values podConfig.*).
type Policy struct {
	// BridgePrefix every PodNetwork bridge must start with.
	BridgePrefix string
	// AllowedParents are the host interfaces whose VLANs PodNetworks may use.
	AllowedParents []string
	// ClusterCIDRs are the cluster's pod and service CIDRs as configured (the operator also
	// discovers them: ServiceCIDR objects, node podCIDRs).
	ClusterCIDRs []netip.Prefix
	// NodeNetworks are the networks the nodes live on (configured; the agent also refuses
	// the ranges of its node's own interfaces).
	NodeNetworks []netip.Prefix
}

// Check refuses a policy that would let a network reach a host interface.
func (p Policy) Check() error {
	if p.BridgePrefix == "" {
		return fmt.Errorf("bridge prefix must not be empty (every host interface would match it)")
	}
	if !bridgeNameRE.MatchString(p.BridgePrefix) {
		return fmt.Errorf("bridge prefix %q must match ^[a-z][a-z0-9-]{0,14}$", p.BridgePrefix)
	}
	for _, h := range HostInterfaces {
		if strings.HasPrefix(h, p.BridgePrefix) {
			return fmt.Errorf("bridge prefix %q matches host interface %s", p.BridgePrefix, h)
		}
	}
	for _, n := range p.AllowedParents {
		if msg := validateHostLinkName(n); msg != "" {
			return fmt.Errorf("allowed parent %q: %s", n, msg)
		}
	}
	return nil
}

// Reserved is every range of the cluster a network may not overlap: the policy's cluster
// CIDRs and node networks, and what the caller discovered (named by where it came from).
func (p Policy) Reserved(discovered []NamedPrefix) []NamedPrefix {
	out := make([]NamedPrefix, 0, len(p.ClusterCIDRs)+len(p.NodeNetworks)+len(discovered))
	for _, c := range p.ClusterCIDRs {
		out = append(out, NamedPrefix{c, "the cluster's network"})
	}
	for _, c := range p.NodeNetworks {
		out = append(out, NamedPrefix{c, "the node network"})
	}
	return append(out, discovered...)
}

// ValidateNetwork checks a PodNetwork on its own: ValidateNetworkSpec, the bridge prefix, the
// VLAN parent allow-list, and no overlap of its range, gateway, route destinations or vias
// with the reserved ranges (NodeAddresses among them).
func (p Policy) ValidateNetwork(pn *berthv1alpha1.PodNetwork, reserved []NamedPrefix) field.ErrorList {
	path := field.NewPath("spec")
	errs := ValidateNetworkSpec(&pn.Spec, path)
	prefix := p.BridgePrefix
	if prefix == "" {
		prefix = DefaultBridgePrefix
	}
	if !strings.HasPrefix(pn.Spec.Bridge, prefix) {
		errs = append(errs, field.Forbidden(path.Child("bridge"), fmt.Sprintf("bridge %s does not start with the bridge prefix %q", pn.Spec.Bridge, prefix)))
	}
	if v := pn.Spec.VLAN; v != nil && !contains(p.AllowedParents, v.Parent) {
		errs = append(errs, field.Forbidden(path.Child("vlan", "parent"), fmt.Sprintf("%s is not in the allowed parents (podConfig.allowedParents)", v.Parent)))
	}
	if v := pn.Spec.VXLAN; v != nil && !contains(p.AllowedParents, v.Parent) {
		errs = append(errs, field.Forbidden(path.Child("vxlan", "parent"), fmt.Sprintf("%s is not in the allowed parents (podConfig.allowedParents)", v.Parent)))
	}
	if c, err := netip.ParsePrefix(pn.Spec.CIDR); err == nil {
		if r, bad := overlapping(c.Masked(), reserved); bad {
			errs = append(errs, field.Forbidden(path.Child("cidr"), fmt.Sprintf("%s overlaps %s", c.Masked(), r)))
		}
	}
	// why: the range check alone would name only spec.cidr; the gateway and each via are what
	// the agent puts on a bridge or routes through, so each names its own field and what it hits.
	if g, err := netip.ParseAddr(pn.Spec.Gateway); err == nil {
		if what, bad := addrIn(g, reserved); bad {
			errs = append(errs, field.Forbidden(path.Child("gateway"), what+": a gateway on a Berth bridge would answer for it"))
		}
	}
	for j, rt := range pn.Spec.Routes {
		if d, err := netip.ParsePrefix(rt.Destination); err == nil {
			if r, bad := overlapping(d.Masked(), reserved); bad {
				errs = append(errs, field.Forbidden(path.Child("routes").Index(j).Child("destination"),
					fmt.Sprintf("%s overlaps %s: the pod's own network carries it, never an attachment", d.Masked(), r)))
			}
		}
		if v, err := netip.ParseAddr(rt.Via); err == nil {
			if what, bad := addrIn(v, reserved); bad {
				errs = append(errs, field.Forbidden(path.Child("routes").Index(j).Child("via"), what+": never a next hop through an attachment"))
			}
		}
	}
	return errs
}

// OlderNetwork reports whether a precedes b: earlier creation, then name. The older of two
// networks in conflict keeps what it claims.
func OlderNetwork(a, b *berthv1alpha1.PodNetwork) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// AcceptNetworks decides every PodNetwork of the cluster: the refusals of each (none means
// accepted). Networks already accepted are decided first, then the others, each group oldest
// first: a network that holds its bridge, range and VLAN keeps them against any newcomer, even
// one created in the same second with a name that sorts first (creation times have one-second
// precision). Each is checked on its own (ValidateNetwork) and then against those accepted
// before it, so a refused network claims nothing: a bridge, a range or a VLAN is taken only by
// an accepted network.
func (p Policy) AcceptNetworks(all []berthv1alpha1.PodNetwork, reserved []NamedPrefix) map[string]field.ErrorList {
	order := make([]*berthv1alpha1.PodNetwork, 0, len(all))
	for i := range all {
		order = append(order, &all[i])
	}
	sort.Slice(order, func(i, j int) bool {
		ai, _ := Accepted(order[i])
		aj, _ := Accepted(order[j])
		if ai != aj {
			return ai
		}
		return OlderNetwork(order[i], order[j])
	})
	out := make(map[string]field.ErrorList, len(all))
	var accepted []*berthv1alpha1.PodNetwork
	path := field.NewPath("spec")
	for _, pn := range order {
		errs := p.ValidateNetwork(pn, reserved)
		if len(errs) == 0 {
			mine, _ := netip.ParsePrefix(pn.Spec.CIDR)
			for _, o := range accepted {
				theirs, _ := netip.ParsePrefix(o.Spec.CIDR)
				switch {
				case o.Spec.Bridge == pn.Spec.Bridge:
					errs = append(errs, field.Forbidden(path.Child("bridge"), fmt.Sprintf("bridge %s belongs to PodNetwork %s (older)", pn.Spec.Bridge, o.Name)))
				case mine.Masked().Overlaps(theirs.Masked()):
					errs = append(errs, field.Forbidden(path.Child("cidr"), fmt.Sprintf("%s overlaps %s of PodNetwork %s (older)", mine.Masked(), theirs.Masked(), o.Name)))
				case pn.Spec.VLAN != nil && o.Spec.VLAN != nil && *pn.Spec.VLAN == *o.Spec.VLAN:
					errs = append(errs, field.Forbidden(path.Child("vlan"), fmt.Sprintf("VLAN %d of %s belongs to PodNetwork %s (older)", pn.Spec.VLAN.ID, pn.Spec.VLAN.Parent, o.Name)))
				case pn.Spec.VXLAN != nil && o.Spec.VXLAN != nil && pn.Spec.VXLAN.VNI == o.Spec.VXLAN.VNI && VXLANPort(pn.Spec.VXLAN.Port) == VXLANPort(o.Spec.VXLAN.Port):
					// why: the kernel keeps one VXLAN device per VNI and port on a node, and two
					// networks on one segment would join each other's pods.
					errs = append(errs, field.Forbidden(path.Child("vxlan"), fmt.Sprintf("VXLAN %d (port %d) belongs to PodNetwork %s (older)", pn.Spec.VXLAN.VNI, VXLANPort(pn.Spec.VXLAN.Port), o.Name)))
				}
			}
		}
		if len(errs) == 0 {
			accepted = append(accepted, pn)
		}
		out[pn.Name] = errs
	}
	return out
}

// ParseCIDRs parses a list of CIDRs (flag values).
func ParseCIDRs(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("CIDR %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Older reports whether a precedes b: earlier creation, then namespace/name. The older of two
// PodConfigs claiming one interface name on a pod keeps it.
func Older(a, b *berthv1alpha1.PodConfig) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
