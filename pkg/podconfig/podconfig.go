// Package podconfig holds what the operator and the node agent share about PodConfigs and
// PodNetworks: validation (structural rules, also expressed as CEL in the CRDs; the ranges no
// pod network may use; the administrator's policy: bridge prefix, allow-listed parents, the
// cluster's and nodes' own networks; conflicts between networks), grants, the pod selector and
// the host-side link names. See README.md for the whole contract.
package podconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// MaxInterfaceName is the kernel's limit on interface names (IFNAMSIZ - 1).
const MaxInterfaceName = 15

var (
	// attachmentNameRE is the safe charset of interface names inside pods.
	attachmentNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)
	// hostLinkNameRE is what a host bridge or parent may be called.
	hostLinkNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$`)
	// bridgeNameRE is what a PodNetwork bridge may be called (the CRD's pattern).
	bridgeNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)
)

// ReservedPodInterfaces are the pod's own interfaces, never an attachment's name.
var ReservedPodInterfaces = []string{"eth0", "lo"}

// HostInterfaces can never be a PodNetwork bridge, whatever the prefix says: the host's
// own uplinks and loopback and the bridges and tunnels of common CNI plugins. Enslaving a
// veth to one of them would put a tenant's pod on the node's or the cluster's network.
var HostInterfaces = []string{
	"lo", "eth0", "eth1", "ens3", "ens4", "ens5", "enp0s3", "bond0",
	"cni0", "cbr0", "docker0", "kube-bridge", "kube-ipvs0", "flannel.1", "flannel-wg",
	"cilium_host", "cilium_net", "cilium_vxlan", "vxlan.calico", "tunl0", "weave", "antrea-gw0",
	"ovs-system", "br-int", "br-ex", "genev_sys_6081", "nodelocaldns",
}

// IsHostInterface reports whether name is one of HostInterfaces.
func IsHostInterface(name string) bool {
	for _, h := range HostInterfaces {
		if name == h {
			return true
		}
	}
	return false
}

// Selector returns the label selector of pc's pods (in pc's namespace): spec.podSelector, or
// podconfig=<name> when it is nil.
func Selector(pc *berthv1alpha1.PodConfig) (labels.Selector, error) {
	if pc.Spec.PodSelector == nil {
		return labels.SelectorFromSet(labels.Set{berthv1alpha1.PodConfigLabel: pc.Name}), nil
	}
	return metav1.LabelSelectorAsSelector(pc.Spec.PodSelector)
}

// Network is a PodNetwork resolved for use: what the operator allocates from and what the
// agent builds on a node. Name is the PodNetwork's (and its IPAllocation's) name.
type Network struct {
	Name    string
	Bridge  string
	Prefix  netip.Prefix
	Gateway netip.Addr // invalid when there is none
	MTU     int        // 0: the kernel's default
	VLAN    *VLAN
	VXLAN   *VXLAN
	Routes  []RouteSpec
}

// VXLAN is a VXLAN segment over a host interface put on a network's bridge, its peers found
// through a multicast group.
type VXLAN struct {
	Parent string
	VNI    int
	Group  netip.Addr
	Port   int
}

// DefaultVXLANPort is IANA's VXLAN port, used when a PodNetwork names none.
const DefaultVXLANPort = 4789

// VXLANPort is port, or DefaultVXLANPort when it is 0 (unset).
func VXLANPort(port int32) int {
	if port == 0 {
		return DefaultVXLANPort
	}
	return int(port)
}

// VLAN is a host interface's VLAN put on a network's bridge.
type VLAN struct {
	Parent string
	ID     int
}

// RouteSpec is one route inside the pod through the attachment; Via invalid = on-link.
type RouteSpec struct {
	Dst netip.Prefix
	Via netip.Addr
}

// String is "<name> (<cidr> on <bridge>)".
func (n Network) String() string { return n.Name + " (" + n.Prefix.String() + " on " + n.Bridge + ")" }

// NetworkOf resolves a PodNetwork. It must have passed ValidateNetworkSpec; a parse error
// here is returned, never guessed around.
func NetworkOf(pn *berthv1alpha1.PodNetwork) (Network, error) {
	p, err := netip.ParsePrefix(pn.Spec.CIDR)
	if err != nil {
		return Network{}, err
	}
	n := Network{Name: pn.Name, Bridge: pn.Spec.Bridge, Prefix: p.Masked()}
	if pn.Spec.Gateway != "" {
		if n.Gateway, err = netip.ParseAddr(pn.Spec.Gateway); err != nil {
			return Network{}, err
		}
	}
	if pn.Spec.MTU != nil {
		n.MTU = int(*pn.Spec.MTU)
	}
	if v := pn.Spec.VLAN; v != nil {
		n.VLAN = &VLAN{Parent: v.Parent, ID: int(v.ID)}
	}
	if v := pn.Spec.VXLAN; v != nil {
		g, err := netip.ParseAddr(v.Group)
		if err != nil {
			return Network{}, err
		}
		n.VXLAN = &VXLAN{Parent: v.Parent, VNI: int(v.VNI), Group: g, Port: VXLANPort(v.Port)}
	}
	for _, r := range pn.Spec.Routes {
		dst, err := netip.ParsePrefix(r.Destination)
		if err != nil {
			return Network{}, err
		}
		rs := RouteSpec{Dst: dst.Masked(), Via: n.Gateway}
		if r.Via != "" {
			if rs.Via, err = netip.ParseAddr(r.Via); err != nil {
				return Network{}, err
			}
		}
		n.Routes = append(n.Routes, rs)
	}
	return n, nil
}

// Granted reports whether pn's namespaceSelector selects the namespace with these labels. A
// selector that does not parse grants nothing.
func Granted(pn *berthv1alpha1.PodNetwork, nsLabels map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(&pn.Spec.NamespaceSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(nsLabels))
}

// HostPeerName is a host-side link name for one attachment of one pod: "bp" and 13 hex digits
// of a hash of pod UID and attachment name, so it stays within 15 characters, is stable across
// container restarts (unlike a PID) and differs between pods.
func HostPeerName(podUID, attachment string) string {
	sum := sha256.Sum256([]byte(podUID + "\x00" + attachment))
	return "bp" + hex.EncodeToString(sum[:])[:13]
}

// AddressCIDR is addr with the network's prefix length, as status.pods[].address shows it.
func AddressCIDR(addr netip.Addr, network netip.Prefix) string {
	return netip.PrefixFrom(addr, network.Bits()).String()
}

// FormatErrors joins field errors for a condition message.
func FormatErrors(errs []error) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, e.Error())
	}
	return strings.Join(parts, "; ")
}

func validateHostLinkName(name string) string {
	if !hostLinkNameRE.MatchString(name) {
		return fmt.Sprintf("must be 1-%d characters of [a-zA-Z0-9_.-], starting with a letter or digit", MaxInterfaceName)
	}
	return ""
}

// Accepted reports whether the operator accepted pn (condition Accepted=True), and otherwise
// why not.
func Accepted(pn *berthv1alpha1.PodNetwork) (bool, string) {
	for _, c := range pn.Status.Conditions {
		if c.Type != berthv1alpha1.ConditionAccepted {
			continue
		}
		if c.Status == metav1.ConditionTrue {
			return true, ""
		}
		return false, c.Message
	}
	return false, "not decided by the operator yet"
}

// Bind resolves pc's attachments to the networks they name: a network binds an attachment
// only if it exists, is not being deleted, was accepted by the operator and grants pc's
// namespace (whose labels are nsLabels). Every refusal names the attachment's field; a
// PodConfig with any refusal binds nothing. networks is looked up by name.
func Bind(pc *berthv1alpha1.PodConfig, networks func(name string) *berthv1alpha1.PodNetwork, nsLabels map[string]string) (map[string]Network, field.ErrorList) {
	path := field.NewPath("spec")
	errs := ValidateSpec(&pc.Spec, path)
	bound := map[string]Network{}
	for i := range pc.Spec.NetworkAttachments {
		a := &pc.Spec.NetworkAttachments[i]
		p := path.Child("networkAttachments").Index(i).Child("network")
		if a.Network == "" {
			continue // ValidateSpec said so
		}
		pn := networks(a.Network)
		if pn == nil {
			errs = append(errs, field.Invalid(p, a.Network, "no PodNetwork of that name (a cluster administrator grants networks)"))
			continue
		}
		if !pn.DeletionTimestamp.IsZero() {
			errs = append(errs, field.Invalid(p, a.Network, "the PodNetwork is being deleted"))
			continue
		}
		if ok, why := Accepted(pn); !ok {
			errs = append(errs, field.Invalid(p, a.Network, "the PodNetwork is not accepted: "+why))
			continue
		}
		if !Granted(pn, nsLabels) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("PodNetwork %s does not grant namespace %s (its namespaceSelector does not select it)", a.Network, pc.Namespace)))
			continue
		}
		n, err := NetworkOf(pn)
		if err != nil {
			errs = append(errs, field.Invalid(p, a.Network, "the PodNetwork does not parse: "+err.Error()))
			continue
		}
		bound[a.Name] = n
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return bound, nil
}
