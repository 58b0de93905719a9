// Package podconfig holds what the operator and the node agent share about PodConfigs:
// validation of a spec (structural rules, also expressed as CEL in the CRD, and the operator's
// policy: bridge prefix, allow-listed parents, cluster CIDRs, conflicts between PodConfigs),
// the deterministic name of a network's IPAllocation, the pod selector and the host-side link
// name. See README.md for the whole contract.
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

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// MaxInterfaceName is the kernel's limit on interface names (IFNAMSIZ - 1).
const MaxInterfaceName = 15

var (
	// attachmentNameRE is the safe charset of interface names inside pods.
	attachmentNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)
	// hostLinkNameRE is what a host bridge or parent may be called.
	hostLinkNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$`)
	dnsLabelUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)
)

// ReservedPodInterfaces are the pod's own interfaces, never an attachment's name.
var ReservedPodInterfaces = []string{"eth0", "lo"}

// HostInterfaces can never be a master or parent, whatever the allow lists say: the host's
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

// Network identifies one network: a host bridge and a CIDR. Attachments with the same master
// and CIDR (in any namespace) share the network and its address pool.
type Network struct {
	Master  string
	Prefix  netip.Prefix
	Gateway netip.Addr // invalid when there is none
}

// String is "<cidr> on <master>".
func (n Network) String() string { return n.Prefix.String() + " on " + n.Master }

// Name is the network's IPAllocation name (NetworkName).
func (n Network) Name() string { return NetworkName(n.Master, n.Prefix) }

// NetworkOf parses an attachment's network. The attachment must have passed ValidateSpec.
func NetworkOf(a *berthv1alpha1.NetworkAttachment) (Network, error) {
	p, err := netip.ParsePrefix(a.CIDR)
	if err != nil {
		return Network{}, err
	}
	n := Network{Master: a.Master, Prefix: p.Masked()}
	if a.Gateway != "" {
		g, err := netip.ParseAddr(a.Gateway)
		if err != nil {
			return Network{}, err
		}
		n.Gateway = g
	}
	return n, nil
}

// NetworkName is the IPAllocation name of the network (master, cidr): the master made a DNS
// label, a dash and 10 hex digits of a SHA-256 over master and the canonical CIDR. It is a
// function of its inputs only, so every operator replica, before and after restarts, agrees
// on it; the hash keeps masters that differ only in characters a name cannot carry (case,
// '_', '.') apart.
func NetworkName(master string, cidr netip.Prefix) string {
	sum := sha256.Sum256([]byte(master + "\x00" + cidr.Masked().String()))
	label := strings.Trim(dnsLabelUnsafe.ReplaceAllString(strings.ToLower(master), "-"), "-")
	if label == "" {
		label = "net"
	}
	return label + "-" + hex.EncodeToString(sum[:])[:10]
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
