package demo

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/agent/podnet"
)

func init() {
	register(60, Scenario{Name: "PodConfig: extra networks for unprivileged pods, made and removed by the node agent (seed 003)", Run: podConfigDemo})
}

func podConfigDemo(ctx context.Context, env *Env) error {
	c := env.Cluster
	rn := c.RealNode()
	if rn == nil {
		fmt.Fprintln(env.Out, "SKIPPED: PodConfig needs the real node (links are made in real pod sandboxes): run `make demo` as root with containerd, runc and the CNI plugins installed.")
		return nil
	}
	// ns is granted the demo's networks; otherNS is not (a tenant there is refused).
	const ns, otherNS, tenantLabel = "demo-podconfig", "demo-podconfig-other", "berth.dev/demo-tenant"
	if err := framework.InstallPodConfigCRDs(ctx, c.RESTConfig); err != nil {
		return err
	}
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = berthv1alpha1.AddToScheme(s)
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	for _, n := range []string{ns, otherNS} {
		if err := framework.EnsureNamespace(ctx, env.Client, n); err != nil {
			return err
		}
		if err := cl.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{tenantLabel: n}}}, client.Merge); err != nil {
			return err
		}
	}
	role, err := chart.AgentClusterRole(rn.ContainerdSocket)
	if err != nil {
		return err
	}
	if err := framework.PodConfigAgentRBAC(ctx, c, role); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "berth-demo-netecho-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	img, err := framework.NetechoImage(ctx, dir)
	if err != nil {
		return err
	}
	if _, err := rn.Ctr(ctx, "images", "import", img); err != nil {
		return err
	}
	op, err := framework.StartPodConfigOperator(ctx, c, "berth-operator-podconfig")
	if err != nil {
		return err
	}
	defer c.StopComponent(op)
	agent, err := framework.StartPodConfigAgent(ctx, c, "berth-agent-podconfig")
	if err != nil {
		return err
	}
	defer c.StopComponent(agent)

	for _, n := range []string{"cnf-a", "cnf-b"} {
		if err := cl.Create(ctx, framework.NetechoPod(ns, n, rn.NodeName, map[string]string{berthv1alpha1.PodConfigLabel: "cnf"})); err != nil {
			return err
		}
	}
	if _, err := framework.WaitPods(ctx, env.Client, ns, berthv1alpha1.PodConfigLabel+"=cnf", 2, 90*time.Second, framework.Running); err != nil {
		return err
	}
	// The cluster administrator grants two networks to namespace demo-podconfig only.
	grant := map[string]string{tenantLabel: ns}
	demo1 := framework.NewPodNetwork("demo1", "berth-demo1", "192.168.160.0/24", "192.168.160.1", grant)
	demo1.Spec.MTU = ptr.To[int32](1400)
	networks := []*berthv1alpha1.PodNetwork{demo1, framework.NewPodNetwork("demo2", "berth-demo2", "10.161.0.0/28", "", grant)}
	fmt.Fprintf(env.Out, "The cluster administrator grants two PodNetworks to namespaces labelled %s=%s (Berth creates and owns their bridges):\n", tenantLabel, ns)
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  PODNETWORK\tBRIDGE\tCIDR\tGATEWAY\tMTU\tACCEPTED (by the operator)")
	for _, n := range networks {
		got, err := framework.CreatePodNetwork(ctx, cl, n, 30*time.Second)
		if err != nil {
			return err
		}
		defer func(name string) { _ = framework.DeletePodNetwork(context.Background(), cl, name, 30*time.Second) }(n.Name)
		gw, mtu := got.Spec.Gateway, "default"
		if gw == "" {
			gw = "none (layer 2)"
		}
		if got.Spec.MTU != nil {
			mtu = fmt.Sprint(*got.Spec.MTU)
		}
		acc := meta.FindStatusCondition(got.Status.Conditions, berthv1alpha1.ConditionAccepted)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s (%s)\n", got.Name, got.Spec.Bridge, got.Spec.CIDR, gw, mtu, acc.Status, acc.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	// A tenant of a namespace the networks do not grant names one: refused, nothing allocated.
	other := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: otherNS, Name: "intruder"},
		Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{{Name: "net1", Network: "demo1"}}}}
	if err := cl.Create(ctx, other); err != nil {
		return err
	}
	var refusal *metav1.Condition
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
			return false, nil
		}
		refusal = meta.FindStatusCondition(other.Status.Conditions, berthv1alpha1.ConditionDegraded)
		return refusal != nil && refusal.Status == metav1.ConditionTrue && refusal.ObservedGeneration == other.Generation, nil
	})
	if err != nil {
		return fmt.Errorf("PodConfig %s/%s naming a network that does not grant its namespace was not refused: %+v", otherNS, other.Name, other.Status)
	}
	fmt.Fprintf(env.Out, "PodConfig %s/%s names demo1 from a namespace it does not grant: phase %s, Degraded %s: %s\n",
		otherNS, other.Name, other.Status.Phase, refusal.Reason, refusal.Message)
	if err := cl.Delete(ctx, other); err != nil {
		return err
	}

	fmt.Fprintln(env.Out, "Two unprivileged pods (uid 65532, no capabilities) on the real node; PodConfig cnf attaches them to both networks:")
	pc := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cnf"},
		Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{
			{Name: "net1", Network: "demo1"},
			{Name: "net2", Network: "demo2"},
		}}}
	if err := cl.Create(ctx, pc); err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pc), pc); err != nil {
			return false, nil
		}
		return pc.Status.Phase == berthv1alpha1.PodConfigConfigured && pc.Status.ConfiguredCount == 2, nil
	})
	if err != nil {
		return fmt.Errorf("PodConfig not configured (phase %s): %w", pc.Status.Phase, err)
	}
	podIP := map[string]string{}
	tw = tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tINTERFACE (as the pod sees it)\tMTU\tADDRESS\tNETWORK\tHOST PEER\tBRIDGE\tSTATE")
	for _, n := range []string{"cnf-a", "cnf-b"} {
		p := &corev1.Pod{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, p); err != nil {
			return err
		}
		podIP[n] = p.Status.PodIP
		ifs, err := framework.NetechoInterfaces(ctx, rn, p.Status.PodIP)
		if err != nil {
			return err
		}
		for _, en := range pc.Status.Pods {
			if en.Pod == n {
				i := ifs[en.Interface]
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", n, en.Interface, i.MTU, strings.Join(i.Addrs, " "), en.Network, en.HostPeer, en.Bridge, en.State)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	addr := func(pod, att string) string {
		for _, en := range pc.Status.Pods {
			if en.Pod == pod && en.Attachment == att {
				return netip.MustParsePrefix(en.Address).Addr().String()
			}
		}
		return ""
	}
	fmt.Fprintln(env.Out, "Traffic between the pods over each network (sent by the pods themselves):")
	for _, t := range []struct{ from, to, att, proto string }{
		{"cnf-a", "cnf-b", "net1", "udp"}, {"cnf-b", "cnf-a", "net1", "tcp"}, {"cnf-a", "cnf-b", "net2", "udp"}, {"cnf-b", "cnf-a", "net2", "tcp"}} {
		var rep framework.NetechoReply
		for i := 0; i < 3; i++ {
			if rep, err = framework.NetechoSend(ctx, rn, podIP[t.from], t.proto, net.JoinHostPort(addr(t.to, t.att), "7777")); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s -> %s over %s: %w", t.from, t.to, t.att, err)
		}
		fmt.Fprintf(env.Out, "  %s -> %s over %s (%s): %s answered, saw the sender as %s\n", t.from, t.to, t.att, t.proto, rep.Server, rep.SeenFrom)
		// The packet crossed the attachment: the receiver saw the sender's address on it.
		if host, _, err := net.SplitHostPort(rep.SeenFrom); err != nil || host != addr(t.from, t.att) {
			return fmt.Errorf("PodConfig traffic: %s -> %s over %s was seen from %q, not %s's %s address %s", t.from, t.to, t.att, rep.SeenFrom, t.from, t.att, addr(t.from, t.att))
		}
	}
	// Berth's links are the ones carrying its mark (netlink group 4877), with their aliases.
	links := func() string {
		out, _ := rn.InNetNS(ctx, "ip", "-o", "link", "show", "group", strconv.Itoa(podnet.LinkGroup))
		var ours []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
				if _, alias, ok := strings.Cut(l, " alias "); ok {
					alias, _, _ = strings.Cut(alias, "\\")
					name += " (" + strings.TrimSpace(alias) + ")"
				}
				ours = append(ours, name)
			}
		}
		if len(ours) == 0 {
			return "none"
		}
		return strings.Join(ours, ", ")
	}
	fmt.Fprintf(env.Out, "Berth's links on the node (ip link show group %d): %s\n", podnet.LinkGroup, links())
	if err := cl.Delete(ctx, pc); err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKeyFromObject(pc), &berthv1alpha1.PodConfig{})) && links() == "none", nil
	})
	if err != nil {
		return fmt.Errorf("PodConfig deletion did not remove the links (%s): %w", links(), err)
	}
	ifs, err := framework.NetechoInterfaces(ctx, rn, podIP["cnf-a"])
	if err != nil {
		return err
	}
	var names []string
	for n := range ifs {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(env.Out, "PodConfig deleted: Berth's links on the node: %s; cnf-a's interfaces now: %s\n", links(), strings.Join(names, " "))
	// The administrator withdraws the networks: each goes once its pool is empty.
	for _, n := range networks {
		if err := framework.DeletePodNetwork(ctx, cl, n.Name, 30*time.Second); err != nil {
			return err
		}
	}
	var pnets berthv1alpha1.PodNetworkList
	var pools berthv1alpha1.IPAllocationList
	if err := cl.List(ctx, &pnets); err != nil {
		return err
	}
	if err := cl.List(ctx, &pools); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "PodNetworks deleted: %d PodNetworks and %d IPAllocations left\n", len(pnets.Items), len(pools.Items))
	if len(pnets.Items)+len(pools.Items) != 0 {
		return fmt.Errorf("PodConfig: %d PodNetworks and %d IPAllocations left after the networks were withdrawn", len(pnets.Items), len(pools.Items))
	}
	fmt.Fprintln(env.Out, "checked: traffic over both networks from the senders' own addresses; links, networks and allocations gone")
	return nil
}
