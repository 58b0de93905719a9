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

// DefaultBridgePrefix is what a master must start with unless it is allow-listed.
const DefaultBridgePrefix = "berth"

// ValidateSpec checks the rules a PodConfig spec must meet on any cluster (the CRD's CEL
// rules say the same where CEL can; this is the authority, used by the operator before it
// allocates and by the agent before it touches a link).
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
	names := map[string]bool{}
	networks := map[string]string{}
	for i := range spec.NetworkAttachments {
		a := &spec.NetworkAttachments[i]
		p := ap.Index(i)
		errs = append(errs, validateAttachment(a, p)...)
		if names[a.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), a.Name))
		}
		names[a.Name] = true
		if n, err := NetworkOf(a); err == nil {
			if other, ok := networks[n.Name()]; ok {
				errs = append(errs, field.Invalid(p.Child("cidr"), a.CIDR,
					fmt.Sprintf("attachment %q already joins network %s; one pod gets one address per network", other, n)))
			}
			networks[n.Name()] = a.Name
		}
	}
	return errs
}

func validateAttachment(a *berthv1alpha1.NetworkAttachment, p *field.Path) field.ErrorList {
	var errs field.ErrorList
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
	if msg := validateHostLinkName(a.Master); msg != "" {
		errs = append(errs, field.Invalid(p.Child("master"), a.Master, msg))
	}
	switch a.LinkType {
	case "", berthv1alpha1.LinkVeth:
		if a.VLANID != nil {
			errs = append(errs, field.Forbidden(p.Child("vlanID"), "only valid with linkType vlan"))
		}
		if a.Parent != "" {
			errs = append(errs, field.Forbidden(p.Child("parent"), "only valid with linkType vlan"))
		}
	case berthv1alpha1.LinkVLAN:
		if a.VLANID == nil {
			errs = append(errs, field.Required(p.Child("vlanID"), "linkType vlan needs a VLAN ID"))
		} else if *a.VLANID < 1 || *a.VLANID > 4094 {
			errs = append(errs, field.Invalid(p.Child("vlanID"), *a.VLANID, "must be 1..4094"))
		}
		if a.Parent == "" {
			errs = append(errs, field.Required(p.Child("parent"), "linkType vlan needs the host interface carrying the VLAN"))
		} else if msg := validateHostLinkName(a.Parent); msg != "" {
			errs = append(errs, field.Invalid(p.Child("parent"), a.Parent, msg))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("linkType"), a.LinkType, []string{string(berthv1alpha1.LinkVeth), string(berthv1alpha1.LinkVLAN)}))
	}
	if a.MTU != nil && (*a.MTU < 68 || *a.MTU > 65535) {
		errs = append(errs, field.Invalid(p.Child("mtu"), *a.MTU, "must be 68..65535"))
	}
	prefix, err := netip.ParsePrefix(a.CIDR)
	if err != nil {
		errs = append(errs, field.Invalid(p.Child("cidr"), a.CIDR, "must be a CIDR such as 192.168.100.0/24 or fd00:1::/64"))
		return errs
	}
	if prefix.Addr().Is4In6() || prefix.Addr().Zone() != "" {
		errs = append(errs, field.Invalid(p.Child("cidr"), a.CIDR, "IPv4-mapped IPv6 and zoned addresses are not supported"))
		return errs
	}
	if prefix.Masked() != prefix {
		errs = append(errs, field.Invalid(p.Child("cidr"), a.CIDR, fmt.Sprintf("must be the network address (%s); host bits are set", prefix.Masked())))
	}
	prefix = prefix.Masked()
	if a.Gateway != "" {
		gp := p.Child("gateway")
		g, err := netip.ParseAddr(a.Gateway)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(gp, a.Gateway, "must be an IP address"))
		case !prefix.Contains(g):
			errs = append(errs, field.Invalid(gp, a.Gateway, fmt.Sprintf("must be inside cidr %s", prefix)))
		case hasNetworkAddress(prefix) && g == prefix.Addr():
			errs = append(errs, field.Invalid(gp, a.Gateway, "cannot be the network address"))
		case hasBroadcast(prefix) && g == lastAddr(prefix):
			errs = append(errs, field.Invalid(gp, a.Gateway, "cannot be the broadcast address"))
		case Usable(prefix, g).Sign() == 0:
			errs = append(errs, field.Invalid(gp, a.Gateway, "leaves no address for pods"))
		}
	}
	for j, r := range a.Routes {
		rp := p.Child("routes").Index(j)
		d, err := netip.ParsePrefix(r.Destination)
		if err != nil {
			errs = append(errs, field.Invalid(rp.Child("destination"), r.Destination, "must be a CIDR"))
		} else if d.Addr().Is4() != prefix.Addr().Is4() {
			errs = append(errs, field.Invalid(rp.Child("destination"), r.Destination, "must be of the cidr's address family"))
		}
		if r.Via != "" {
			v, err := netip.ParseAddr(r.Via)
			if err != nil {
				errs = append(errs, field.Invalid(rp.Child("via"), r.Via, "must be an IP address"))
			} else if !prefix.Contains(v) {
				errs = append(errs, field.Invalid(rp.Child("via"), r.Via, fmt.Sprintf("must be inside cidr %s (directly reachable)", prefix)))
			}
		} else if a.Gateway == "" && err == nil && d.Bits() == 0 {
			errs = append(errs, field.Required(rp.Child("via"), "a default route needs via or a gateway"))
		}
	}
	return errs
}

// Policy is what the cluster administrator allows (operator flags, chart values podConfig.*).
type Policy struct {
	// ClusterCIDRs are the cluster's pod and service CIDRs: no PodConfig network may overlap
	// them (a pod would route cluster traffic into the attachment).
	ClusterCIDRs []netip.Prefix
	// BridgePrefix every master must start with, unless AllowedBridges names it.
	BridgePrefix string
	// AllowedBridges are existing bridges PodConfigs may join besides the prefixed ones.
	AllowedBridges []string
	// AllowedParents are the host interfaces whose VLANs PodConfigs may use.
	AllowedParents []string
}

// Check refuses a policy that would let a PodConfig reach a host interface.
func (p Policy) Check() error {
	if p.BridgePrefix == "" {
		return fmt.Errorf("bridge prefix must not be empty (every host interface would match it)")
	}
	for _, h := range HostInterfaces {
		if strings.HasPrefix(h, p.BridgePrefix) {
			return fmt.Errorf("bridge prefix %q matches host interface %s", p.BridgePrefix, h)
		}
	}
	for _, list := range [][]string{p.AllowedBridges, p.AllowedParents} {
		for _, n := range list {
			if IsHostInterface(n) {
				return fmt.Errorf("%s is a host or CNI interface and cannot be allow-listed", n)
			}
			if msg := validateHostLinkName(n); msg != "" {
				return fmt.Errorf("allow-listed interface %q: %s", n, msg)
			}
		}
	}
	return nil
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
			return nil, fmt.Errorf("cluster CIDR %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Validate checks pc's spec and the policy's rules on it. Every error names its field.
func (p Policy) Validate(pc *berthv1alpha1.PodConfig) field.ErrorList {
	path := field.NewPath("spec")
	errs := ValidateSpec(&pc.Spec, path)
	for i := range pc.Spec.NetworkAttachments {
		a := &pc.Spec.NetworkAttachments[i]
		ap := path.Child("networkAttachments").Index(i)
		switch {
		case IsHostInterface(a.Master):
			errs = append(errs, field.Forbidden(ap.Child("master"), fmt.Sprintf("%s is a host or CNI interface, never a PodConfig bridge", a.Master)))
		case !strings.HasPrefix(a.Master, p.BridgePrefix) && !contains(p.AllowedBridges, a.Master):
			errs = append(errs, field.Forbidden(ap.Child("master"),
				fmt.Sprintf("bridge %s does not start with %q and is not in the operator's allowed bridges", a.Master, p.BridgePrefix)))
		}
		if a.Parent != "" {
			switch {
			case IsHostInterface(a.Parent) && !contains(p.AllowedParents, a.Parent):
				errs = append(errs, field.Forbidden(ap.Child("parent"), fmt.Sprintf("%s is a host interface and not in the operator's allowed parents", a.Parent)))
			case !contains(p.AllowedParents, a.Parent):
				errs = append(errs, field.Forbidden(ap.Child("parent"), fmt.Sprintf("%s is not in the operator's allowed parents", a.Parent)))
			}
			if a.Parent == a.Master {
				errs = append(errs, field.Invalid(ap.Child("parent"), a.Parent, "cannot be the master bridge itself"))
			}
		}
		if prefix, err := netip.ParsePrefix(a.CIDR); err == nil {
			for _, c := range p.ClusterCIDRs {
				if prefix.Overlaps(c) {
					errs = append(errs, field.Forbidden(ap.Child("cidr"), fmt.Sprintf("%s overlaps the cluster's network %s", prefix.Masked(), c)))
				}
			}
		}
	}
	return errs
}

// Older reports whether a precedes b: earlier creation, then namespace/name. The older of two
// PodConfigs in conflict keeps what it claims.
func Older(a, b *berthv1alpha1.PodConfig) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// ValidateAgainst refuses pc's networks that clash with networks of older PodConfigs (others,
// any namespace, including ones being deleted: their links still exist): the same bridge with
// a different CIDR (one bridge is one L2 segment: two subnets on it would leak between
// tenants and confuse the bridge's address), or the same network with a different gateway.
func ValidateAgainst(pc *berthv1alpha1.PodConfig, others []berthv1alpha1.PodConfig) field.ErrorList {
	older := make([]*berthv1alpha1.PodConfig, 0, len(others))
	for i := range others {
		o := &others[i]
		if o.UID == pc.UID || (o.Namespace == pc.Namespace && o.Name == pc.Name) || !Older(o, pc) {
			continue
		}
		older = append(older, o)
	}
	sort.Slice(older, func(i, j int) bool { return Older(older[i], older[j]) })
	var errs field.ErrorList
	path := field.NewPath("spec", "networkAttachments")
	for i := range pc.Spec.NetworkAttachments {
		a := &pc.Spec.NetworkAttachments[i]
		n, err := NetworkOf(a)
		if err != nil {
			continue
		}
	others:
		for _, o := range older {
			for j := range o.Spec.NetworkAttachments {
				b := &o.Spec.NetworkAttachments[j]
				if b.Master != a.Master {
					continue
				}
				m, err := NetworkOf(b)
				if err != nil {
					continue
				}
				if m.Prefix != n.Prefix {
					errs = append(errs, field.Invalid(path.Index(i).Child("cidr"), a.CIDR,
						fmt.Sprintf("bridge %s already carries %s for PodConfig %s/%s", a.Master, m.Prefix, o.Namespace, o.Name)))
					break others
				}
				if m.Gateway != n.Gateway {
					errs = append(errs, field.Invalid(path.Index(i).Child("gateway"), a.Gateway,
						fmt.Sprintf("network %s has gateway %q in PodConfig %s/%s", n, gatewayString(m.Gateway), o.Namespace, o.Name)))
					break others
				}
			}
		}
	}
	return errs
}

func gatewayString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
