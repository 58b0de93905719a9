package controller

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

func nodeAt(name, podCIDR string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

func withGateway(pn *berthv1alpha1.PodNetwork, gw string, routes ...berthv1alpha1.Route) *berthv1alpha1.PodNetwork {
	pn.Spec.Gateway, pn.Spec.Routes = gw, routes
	return pn
}

// The README's own cluster as issue 35 found it: nodes without podCIDRs, no cluster CIDRs
// configured. Every network is refused naming podConfig.clusterCIDRs until the administrator
// sets it or a node gets a podCIDR; then networks holding a node's address (range, gateway,
// route destination or via) are refused naming the node, the address and the field, and the
// others are accepted, oldest first, a refused one squatting nothing.
func TestNetworkNodeAddresses(t *testing.T) {
	nodes := func(podCIDR string) []client.Object {
		return []client.Object{nodeAt("berth-real", podCIDR, "10.244.0.1"), nodeAt("berth-real-2", "", "10.244.1.1"),
			nodeAt("berth-real-3", "", "10.244.2.1"), nodeAt("kwok-0", "", "127.0.0.1")}
	}
	clear := network("clear", 0, "berth-clear", "192.168.9.0/24")
	cases := []struct {
		name         string
		clusterCIDRs string // empty: none configured
		podCIDR      string // berth-real's; empty: no node has one
		nets         []*berthv1alpha1.PodNetwork
		accepted     map[string]bool
		wantReason   map[string]string
		wantMsg      map[string][]string
	}{
		{"no pod range known: everything refused naming the value to set", "", "",
			[]*berthv1alpha1.PodNetwork{clear, network("squat", 1, "berth-sq", "10.244.1.0/24")},
			map[string]bool{"clear": false, "squat": false},
			map[string]string{"clear": ReasonNoPodRange, "squat": ReasonNoPodRange},
			map[string][]string{"clear": {"spec.cidr: Forbidden: the cluster's pod range is unknown", "set podConfig.clusterCIDRs"}}},
		{"pod range configured: the node's address refused, the clear network accepted", "10.96.0.0/16", "",
			[]*berthv1alpha1.PodNetwork{clear, withGateway(network("gw", 1, "berth-gw", "10.244.2.0/24"), "10.244.2.1")},
			map[string]bool{"clear": true, "gw": false},
			map[string]string{"clear": ReasonAccepted, "gw": ReasonRefused},
			map[string][]string{"gw": {"spec.cidr: Forbidden: 10.244.2.0/24 overlaps node berth-real-3's InternalIP 10.244.2.1/32",
				"spec.gateway: Forbidden: 10.244.2.1 is node berth-real-3's InternalIP"}}},
		{"pod range discovered from one node's podCIDR", "", "10.244.0.0/24",
			[]*berthv1alpha1.PodNetwork{clear,
				network("range", 1, "berth-r", "10.244.1.0/25"),
				withGateway(network("via", 2, "berth-v", "192.168.10.0/24"), "", berthv1alpha1.Route{Destination: "10.244.1.1/32"}),
				withGateway(network("dst", 3, "berth-d", "192.168.11.0/24"), "", berthv1alpha1.Route{Destination: "172.20.0.0/16", Via: "192.168.11.7"}),
			},
			map[string]bool{"clear": true, "range": false, "via": false, "dst": true},
			map[string]string{"range": ReasonRefused, "via": ReasonRefused},
			map[string][]string{
				"range": {"spec.cidr: Forbidden: 10.244.1.0/25 overlaps node berth-real-2's InternalIP 10.244.1.1/32"},
				"via":   {"spec.routes[0].destination: Forbidden: 10.244.1.1/32 overlaps node berth-real-2's InternalIP"},
			}},
		{"a refused network squats nothing: a later one takes its bridge", "10.96.0.0/16", "",
			[]*berthv1alpha1.PodNetwork{network("bad", 0, "berth-x", "10.244.0.0/24"), network("good", 1, "berth-x", "192.168.12.0/24")},
			map[string]bool{"bad": false, "good": true}, nil,
			map[string][]string{"bad": {"node berth-real's InternalIP 10.244.0.1/32"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := nodes(tc.podCIDR)
			var names []string
			for _, n := range tc.nets {
				objs = append(objs, n.DeepCopy())
				names = append(names, n.Name)
			}
			r, c := newNetworkReconciler(t, objs...)
			r.Policy.ClusterCIDRs = nil
			if tc.clusterCIDRs != "" {
				r.Policy.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix(tc.clusterCIDRs)}
			}
			reconcileNetworks(t, r, names...)
			for _, name := range names {
				pn := &berthv1alpha1.PodNetwork{}
				if err := c.Get(context.Background(), client.ObjectKey{Name: name}, pn); err != nil {
					t.Fatal(err)
				}
				ok, why := podconfig.Accepted(pn)
				if ok != tc.accepted[name] {
					t.Errorf("%s: accepted=%v (%q), want %v", name, ok, why, tc.accepted[name])
				}
				for _, m := range tc.wantMsg[name] {
					if !strings.Contains(why, m) {
						t.Errorf("%s: refusal %q does not contain %q", name, why, m)
					}
				}
				if want := tc.wantReason[name]; want != "" {
					if c := meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionAccepted); c == nil || c.Reason != want {
						t.Errorf("%s: Accepted reason %+v, want %s", name, c, want)
					}
				}
			}
		})
	}
}

// Setting clusterCIDRs (a restarted operator with the chart value) or a node getting its
// podCIDR lifts the blanket refusal on the next decision.
func TestNetworkNoPodRangeLifted(t *testing.T) {
	node := nodeAt("n1", "", "10.244.0.1")
	r, c := newNetworkReconciler(t, network("a", 0, "berth-a", "192.168.1.0/24"), node)
	r.Policy.ClusterCIDRs = nil
	ctx := context.Background()
	reconcileNetworks(t, r, "a")
	pn := &berthv1alpha1.PodNetwork{}
	_ = c.Get(ctx, client.ObjectKey{Name: "a"}, pn)
	if ok, why := podconfig.Accepted(pn); ok || !strings.Contains(why, "podConfig.clusterCIDRs") {
		t.Fatalf("accepted=%v %q; want refused naming podConfig.clusterCIDRs", ok, why)
	}
	node.Spec.PodCIDRs = []string{"10.244.0.0/24"}
	if err := c.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	reconcileNetworks(t, r, "a")
	_ = c.Get(ctx, client.ObjectKey{Name: "a"}, pn)
	if ok, why := podconfig.Accepted(pn); !ok {
		t.Fatalf("still refused after the node got its podCIDR: %q", why)
	}
}

// Ready says how an accepted network is used, and says released once its last address is
// freed (issue 35: it kept "1 addresses in use").
func TestNetworkReadyReleased(t *testing.T) {
	pool := &berthv1alpha1.IPAllocation{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: berthv1alpha1.IPAllocationSpec{Master: "berth-a", CIDR: "192.168.1.0/24",
			Allocations: []berthv1alpha1.Allocation{{Address: "192.168.1.2", PodNamespace: "ns", PodName: "p", PodUID: "u", PodConfig: "cfg", Attachment: "net1"}}}}
	r, c := newNetworkReconciler(t, network("a", 0, "berth-a", "192.168.1.0/24"), network("b", 1, "berth-b", "192.168.2.0/24"), pool)
	ctx := context.Background()
	ready := func(name string) *metav1.Condition {
		t.Helper()
		pn := &berthv1alpha1.PodNetwork{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, pn); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionReady)
	}
	for _, step := range []struct {
		name                string
		allocs              []berthv1alpha1.Allocation
		net                 string
		wantReason, wantMsg string
	}{
		{"one address held", pool.Spec.Allocations, "a", ReasonInUse, "1 addresses in use"},
		{"never used", nil, "b", ReasonIdle, "0 addresses in use"},
		{"released", []berthv1alpha1.Allocation{}, "a", ReasonReleased, "0 addresses in use: every address was released"},
	} {
		if step.allocs != nil {
			p := &berthv1alpha1.IPAllocation{}
			_ = c.Get(ctx, client.ObjectKey{Name: "a"}, p)
			p.Spec.Allocations = step.allocs
			if err := c.Update(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		reconcileNetworks(t, r, "a", "b")
		if rd := ready(step.net); rd == nil || rd.Status != metav1.ConditionTrue || rd.Reason != step.wantReason || rd.Message != step.wantMsg && !strings.HasPrefix(rd.Message, step.wantMsg) {
			t.Errorf("%s: Ready %+v, want True %s %q", step.name, rd, step.wantReason, step.wantMsg)
		}
	}
}

// Only node events that can change a decision re-decide every network.
func TestNodeAddressingChanged(t *testing.T) {
	base := nodeAt("n1", "10.244.0.0/24", "10.244.0.1")
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Node)
		want   bool
	}{
		{"heartbeat", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			n.ResourceVersion = "2"
		}, false},
		{"images", func(n *corev1.Node) { n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}} }, false},
		{"address added", func(n *corev1.Node) {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.9"})
		}, true},
		{"address changed", func(n *corev1.Node) { n.Status.Addresses[0].Address = "10.244.0.2" }, true},
		{"podCIDRs set", func(n *corev1.Node) { n.Spec.PodCIDRs = append(n.Spec.PodCIDRs, "fd00::/64") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.mutate(n)
			if got := nodeAddressingChanged.Update(crevent.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if !nodeAddressingChanged.Create(crevent.CreateEvent{Object: base}) || !nodeAddressingChanged.Delete(crevent.DeleteEvent{Object: base}) {
		t.Fatal("a node added or deleted must re-decide the networks")
	}
}
