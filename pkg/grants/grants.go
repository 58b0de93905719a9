// Package grants keeps, in every namespace that administrators granted something, the
// read-only Grants object tenants read to see which PodNetworks their PodConfigs may name and
// which shared InstanceClasses their pods may carry, and writes each InstanceClass's Granted
// condition. The computation (Compute, ClassGranted) is pure; controller.go feeds it from the
// operator's caches. See README.md.
package grants

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// Condition reasons.
const (
	ReasonListed            = "Listed"
	ReasonNetworksNotListed = "NetworksNotListed"
	ReasonTruncated         = "Truncated"
	ReasonNamespacesExist   = "NamespacesExist"
	ReasonNamespacesMissing = "NamespacesMissing"
)

// Input is what one namespace's grants are computed from.
type Input struct {
	Namespace *corev1.Namespace
	// Networks are every PodNetwork of the cluster; nil with NetworksListed false when the
	// operator runs without the PodConfig controller (nobody decides networks then, so
	// listing them would show every one Pending forever).
	Networks       []berthv1alpha1.PodNetwork
	NetworksListed bool
	Classes        []berthv1alpha1.InstanceClass
}

// Compute returns the Grants status of in.Namespace and whether it grants anything at all
// (an ungranted namespace gets no Grants object). Conditions carry no transition time: the
// caller merges them into the stored ones (meta.SetStatusCondition keeps a time that did not
// change).
func Compute(in Input) (berthv1alpha1.GrantsStatus, bool) {
	ns := in.Namespace
	var s berthv1alpha1.GrantsStatus
	for i := range in.Networks {
		pn := &in.Networks[i]
		if !podconfig.Granted(pn, ns.Labels) {
			continue
		}
		s.Networks = append(s.Networks, grantedNetwork(pn))
	}
	for i := range in.Classes {
		ic := &in.Classes[i]
		if !slices.Contains(ic.Spec.Namespaces, ns.Name) {
			continue
		}
		others := 0
		for _, n := range ic.Spec.Namespaces {
			if n != ns.Name {
				others++
			}
		}
		s.InstanceClasses = append(s.InstanceClasses, berthv1alpha1.GrantedInstanceClass{Name: ic.Name, SharedWith: int32(others)})
	}
	granted := len(s.Networks) > 0 || len(s.InstanceClasses) > 0
	slices.SortFunc(s.Networks, func(a, b berthv1alpha1.GrantedNetwork) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.InstanceClasses, func(a, b berthv1alpha1.GrantedInstanceClass) int { return strings.Compare(a.Name, b.Name) })
	complete := metav1.Condition{Type: berthv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: ReasonListed,
		Message: fmt.Sprintf("%d PodNetworks and %d InstanceClasses grant this namespace", len(s.Networks), len(s.InstanceClasses))}
	var cut []string
	if len(s.Networks) > berthv1alpha1.MaxGrantedItems {
		cut = append(cut, fmt.Sprintf("%d PodNetworks", len(s.Networks)))
		s.Networks = s.Networks[:berthv1alpha1.MaxGrantedItems]
	}
	if len(s.InstanceClasses) > berthv1alpha1.MaxGrantedItems {
		cut = append(cut, fmt.Sprintf("%d InstanceClasses", len(s.InstanceClasses)))
		s.InstanceClasses = s.InstanceClasses[:berthv1alpha1.MaxGrantedItems]
	}
	switch {
	case !in.NetworksListed:
		// why False and not an empty list: "no network" and "networks not looked at" must not
		// read the same to a tenant.
		complete.Status, complete.Reason = metav1.ConditionFalse, ReasonNetworksNotListed
		complete.Message = fmt.Sprintf("PodNetworks are not listed: the operator runs without the PodConfig controller (chart value podConfig.enabled=false), so no network is decided; %d InstanceClasses grant this namespace", len(s.InstanceClasses))
	case len(cut) > 0:
		complete.Status, complete.Reason = metav1.ConditionFalse, ReasonTruncated
		complete.Message = fmt.Sprintf("%s grant this namespace; each list shows the first %d by name", strings.Join(cut, " and "), berthv1alpha1.MaxGrantedItems)
	}
	s.OwnClasses = berthv1alpha1.OwnClassesStatement
	meta.SetStatusCondition(&s.Conditions, complete)
	return s, granted
}

func grantedNetwork(pn *berthv1alpha1.PodNetwork) berthv1alpha1.GrantedNetwork {
	g := berthv1alpha1.GrantedNetwork{Name: pn.Name, CIDR: pn.Spec.CIDR, Gateway: pn.Spec.Gateway, State: networkState(pn)}
	if pn.Spec.MTU != nil {
		mtu := *pn.Spec.MTU
		g.MTU = &mtu
	}
	for _, r := range pn.Spec.Routes {
		g.Routes = append(g.Routes, berthv1alpha1.GrantedRoute{Destination: r.Destination, Via: r.Via})
	}
	return g
}

// networkState reads the operator's decision on pn: only a decision on the current generation
// counts, so a spec the administrator just changed is Pending, never an old Accepted.
func networkState(pn *berthv1alpha1.PodNetwork) string {
	if !pn.DeletionTimestamp.IsZero() {
		return berthv1alpha1.GrantedNetworkDeleting
	}
	c := meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionAccepted)
	switch {
	case c == nil || c.ObservedGeneration != pn.Generation:
		return berthv1alpha1.GrantedNetworkPending
	case c.Status == metav1.ConditionTrue:
		return berthv1alpha1.GrantedNetworkAccepted
	default:
		return berthv1alpha1.GrantedNetworkRefused
	}
}

// ClassGranted is an InstanceClass's Granted condition: True when every namespace it lists
// exists, False naming the missing ones (the grant already holds for them: a namespace created
// later under that name is in the class).
func ClassGranted(ic *berthv1alpha1.InstanceClass, exists func(string) bool) metav1.Condition {
	var missing []string
	for _, n := range ic.Spec.Namespaces {
		if !exists(n) {
			missing = append(missing, n)
		}
	}
	c := metav1.Condition{Type: berthv1alpha1.ConditionGranted, Status: metav1.ConditionTrue, Reason: ReasonNamespacesExist,
		ObservedGeneration: ic.Generation,
		Message:            fmt.Sprintf("class %s is shared by namespaces %s", ic.Name, strings.Join(ic.Spec.Namespaces, ", "))}
	if len(missing) > 0 {
		slices.Sort(missing)
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNamespacesMissing
		c.Message = fmt.Sprintf("namespaces %s do not exist (the grant holds for them once they are created; remove them from spec.namespaces if they are not meant to share class %s)",
			strings.Join(missing, ", "), ic.Name)
	}
	return c
}
