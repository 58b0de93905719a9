package realnode

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// TestPodConfigAcrossRealNodes: a PodConfig attaches a pod on berth-real-2 and a pod on
// berth-real-3 to one PodNetwork whose bridge carries VLAN 10 of each node's uplink (the veth
// into the cluster's link bridge), each node's agent running in that node's namespace as the
// DaemonSet's hostNetwork pod would. Where the kernel has 802.1Q the two pods talk over the
// network across the nodes, from the addresses the operator allocated; where it has not,
// every entry says so. Either way, deleting the PodConfig leaves both nodes' links and
// addresses as they were.
func TestPodConfigAcrossRealNodes(t *testing.T) {
	framework.NeedRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	img, err := framework.NetechoImage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Config{
		RealNode:    &cluster.RealNodeConfig{Count: 3, Images: []string{img}},
		WithoutKWOK: true, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	rns := c.RealNodes()
	nodes := rns[1:] // both on the link bridge by an uplink of the same name
	if err := framework.InstallPodConfigCRDs(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	role, err := chart.AgentClusterRole(nodes[0].ContainerdSocket)
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.PodConfigAgentRBAC(ctx, c, role); err != nil {
		t.Fatal(err)
	}
	allow := "--podconfig-allowed-parents=" + cluster.NodeUplink
	op, err := framework.StartPodConfigOperator(ctx, c, "berth-operator-multinode", allow)
	if err != nil {
		t.Fatal(err)
	}
	defer c.StopComponent(op)
	for _, rn := range nodes {
		a, err := framework.StartPodConfigAgentOn(ctx, c, rn, "berth-agent-podconfig-"+rn.NodeName, allow)
		if err != nil {
			t.Fatal(err)
		}
		defer c.StopComponent(a)
	}
	cl := framework.PodConfigClient(t, c)
	const ns, tenantLabel = "multinode-podconfig", "berth.dev/e2e-tenant"
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	if err := cl.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{tenantLabel: ns}}}, client.Merge); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bridge, cidr, att string
		uplink                  func(*berthv1alpha1.PodNetworkSpec)
		probe                   []string // a link of the kind, made on the first node to ask its kernel
		unsupported             string
	}{{
		name: "vlan", bridge: "berth-mnvlan", cidr: "192.168.171.0/24", att: "vlan10",
		uplink: func(s *berthv1alpha1.PodNetworkSpec) {
			s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 10, Parent: cluster.NodeUplink}
		},
		probe:       []string{"ip", "link", "add", "link", cluster.NodeUplink, "name", "e2eprobe", "type", "vlan", "id", "4094"},
		unsupported: "the node's kernel has no 802.1Q VLAN support",
	}, {
		// why: VXLAN carries the segment where 802.1Q is missing (this CI machine's kernel).
		name: "vxlan", bridge: "berth-mnvx", cidr: "192.168.172.0/24", att: "vx4242",
		uplink: func(s *berthv1alpha1.PodNetworkSpec) {
			s.VXLAN = &berthv1alpha1.PodNetworkVXLAN{VNI: 4242, Parent: cluster.NodeUplink, Group: "239.7.7.7"}
			s.MTU = ptr.To[int32](1400)
		},
		probe:       []string{"ip", "link", "add", "e2eprobe", "type", "vxlan", "id", "4094", "dev", cluster.NodeUplink, "group", "239.7.7.8", "dstport", "4789"},
		unsupported: "the node's kernel has no VXLAN support",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// The kernel decides which outcome is right: probe it with a link the test makes itself.
			_, probeErr := nodes[0].InNetNS(ctx, tc.probe[0], tc.probe[1:]...)
			supported := probeErr == nil
			if supported {
				if out, err := nodes[0].InNetNS(ctx, "ip", "link", "del", "e2eprobe"); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
			}
			t.Logf("the nodes' kernel supports %s: %v (%v)", tc.name, supported, probeErr)
			pn := framework.NewPodNetwork("multinode-"+tc.name, tc.bridge, tc.cidr, "", map[string]string{tenantLabel: ns})
			tc.uplink(&pn.Spec)
			spanNodes(ctx, t, c, cl, nodes, ns, "span-"+tc.name, tc.att, pn, supported, tc.unsupported)
		})
	}
}

// spanNodes attaches a pod on each of nodes to pn through a PodConfig named pcName; where the
// kernel supports pn's uplink the pods talk across the nodes from their allocated addresses,
// where it does not every entry says unsupported. Deleting the PodConfig brings both nodes'
// links and addresses back to what they were.
func spanNodes(ctx context.Context, t *testing.T, c *cluster.Cluster, cl client.Client, nodes []*cluster.RealNode, ns, pcName, att string,
	pn *berthv1alpha1.PodNetwork, supported bool, unsupported string) {
	if _, err := framework.CreatePodNetwork(ctx, cl, pn, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	podOn := map[string]string{pcName + "-a": nodes[0].NodeName, pcName + "-b": nodes[1].NodeName}
	names := []string{pcName + "-a", pcName + "-b"}
	for _, p := range names {
		pod := framework.NetechoPod(ns, p, podOn[p], map[string]string{berthv1alpha1.PodConfigLabel: pcName})
		if err := cl.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := framework.WaitPods(ctx, c.Client, ns, berthv1alpha1.PodConfigLabel+"="+pcName, 2, 2*time.Minute, podReady); err != nil {
		t.Fatal(err)
	}
	// The nodes as the PodConfig finds them (pods running, the network accepted): deleting it
	// must bring them back to exactly this.
	before := map[string][]string{}
	for _, rn := range nodes {
		st, err := framework.NodeNetState(ctx, rn)
		if err != nil {
			t.Fatal(err)
		}
		before[rn.NodeName] = withoutCNIVeths(st)
	}
	pc := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pcName}, Spec: berthv1alpha1.PodConfigSpec{
		PodSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{berthv1alpha1.PodConfigLabel: pcName}},
		NetworkAttachments: []berthv1alpha1.NetworkAttachment{{Name: att, Network: pn.Name}}}}
	if err := cl.Create(ctx, pc); err != nil {
		t.Fatal(err)
	}
	wantState, wantErr := berthv1alpha1.AttachmentConfigured, ""
	if !supported {
		wantState, wantErr = berthv1alpha1.AttachmentFailed, unsupported
	}
	pc = framework.WaitPodConfig(ctx, t, cl, ns, pcName, fmt.Sprintf("both entries %s %q", wantState, wantErr), 90*time.Second, func(pc *berthv1alpha1.PodConfig) bool {
		ok := len(pc.Status.Pods) == 2
		for _, en := range pc.Status.Pods {
			ok = ok && en.State == wantState && strings.Contains(en.LastError, wantErr)
		}
		return ok
	})
	if supported {
		addr := map[string]string{}
		for _, en := range pc.Status.Pods {
			if en.Attachment == att {
				ip, _, _ := net.ParseCIDR(en.Address)
				if ip == nil {
					ip = net.ParseIP(en.Address)
				}
				addr[en.Pod] = ip.String()
			}
		}
		for _, dir := range [][2]string{{names[0], names[1]}, {names[1], names[0]}} {
			from, to := dir[0], dir[1]
			for _, proto := range []string{"udp", "tcp"} {
				pod := &corev1.Pod{}
				if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: from}, pod); err != nil {
					t.Fatal(err)
				}
				var rep framework.NetechoReply
				var err error
				// why: the first datagram may race ARP (and, on a VXLAN, the group's flood) across the link bridge.
				for i := 0; i < 3; i++ {
					if rep, err = framework.NetechoSend(ctx, c.RealNodeNamed(podOn[from]), pod.Status.PodIP, proto, net.JoinHostPort(addr[to], "7777")); err == nil {
						break
					}
				}
				if err != nil {
					t.Errorf("%s on %s -> %s on %s over %s (%s): %v", from, podOn[from], to, podOn[to], att, proto, err)
					continue
				}
				if host, _, _ := net.SplitHostPort(rep.SeenFrom); host != addr[from] || rep.Server != to {
					t.Errorf("%s -> %s (%s): answered by %s seeing %s; want %s seeing %s", from, to, proto, rep.Server, rep.SeenFrom, to, addr[from])
				}
				t.Logf("%s on %s -> %s on %s over %s (%s): answered by %s, seeing %s", from, podOn[from], to, podOn[to], att, proto, rep.Server, rep.SeenFrom)
			}
		}
	}

	if err := cl.Delete(ctx, pc); err != nil {
		t.Fatal(err)
	}
	for _, rn := range nodes {
		var after []string
		var readErr error
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			// why: keep the last state read whole; a read cut off by the deadline shows nothing.
			st, err := framework.NodeNetState(ctx, rn)
			if readErr = err; err == nil {
				after = withoutCNIVeths(st)
			}
			return readErr == nil && slices.Equal(after, before[rn.NodeName]), nil
		})
		if err != nil {
			// why: say what else happened meanwhile (a pod's sandbox re-created changes its veth).
			evs, _ := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			for _, e := range evs.Items {
				t.Logf("event %s %s/%s %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
			t.Errorf("node %s: links and addresses not back to what they were (%v):\nbefore %s\nafter  %s", rn.NodeName, readErr,
				strings.Join(before[rn.NodeName], "\n       "), strings.Join(after, "\n       "))
		}
	}
	for _, p := range names {
		if err := cl.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p}}); err != nil {
			t.Fatal(err)
		}
	}
	// why: wait until the pods are gone: their sandboxes' CNI ports leave the node's CNI bridge
	// as they go (changing its address), which the next case's before/after would see.
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: berthv1alpha1.PodConfigLabel + "=" + pcName})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods of %s not gone: %v", pcName, err)
	}
	if err := framework.DeletePodNetwork(ctx, cl, pn.Name, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// withoutCNIVeths drops the CNI plugin's pod veths (and their addresses) from a NodeNetState:
// they come and go with pod sandboxes, which the kubelet may re-create at any time under load,
// and Berth never creates or names a link veth*. Every other link, Berth's included, stays.
func withoutCNIVeths(state []string) []string {
	var out []string
	for _, l := range state {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "veth") {
			continue
		}
		out = append(out, l)
	}
	return out
}
