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
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/agent/podnet"
)

func init() {
	register(60, Scenario{Name: "PodConfig: extra networks for unprivileged pods, made and removed by the node agent (seed 003)", Run: podConfigDemo})
}

// podConfig is one run of the PodConfig scenario: the real node it runs on and a client that
// knows Berth's types.
type podConfig struct {
	env *Env
	rn  *cluster.RealNode
	cl  client.Client
}

// The scenario's namespaces: ns is granted the demo's networks; otherNS is not (a tenant there
// is refused).
const (
	podConfigNS          = "demo-podconfig"
	podConfigOtherNS     = "demo-podconfig-other"
	podConfigTenantLabel = "berth.dev/demo-tenant"
)

func podConfigDemo(ctx context.Context, env *Env) error {
	rn := env.Cluster.RealNode()
	if rn == nil {
		fmt.Fprintln(env.Out, "SKIPPED: PodConfig needs the real node (links are made in real pod sandboxes): run `make demo` as root with containerd, runc and the CNI plugins installed.")
		return nil
	}
	d, err := newPodConfig(ctx, env, rn)
	if err != nil {
		return err
	}
	stop, err := d.startComponents(ctx)
	if err != nil {
		return err
	}
	defer stop()
	if err := d.startPods(ctx); err != nil {
		return err
	}
	networks, err := d.grantNetworks(ctx)
	// The networks made so far are deleted however the scenario ends.
	defer func() {
		for _, n := range networks {
			_ = framework.DeletePodNetwork(context.Background(), d.cl, n.Name, 30*time.Second)
		}
	}()
	if err != nil {
		return err
	}
	if err := d.refuseUngranted(ctx); err != nil {
		return err
	}
	pc, podIP, err := d.attach(ctx)
	if err != nil {
		return err
	}
	if err := d.checkTraffic(ctx, pc, podIP); err != nil {
		return err
	}
	if err := d.detach(ctx, pc, podIP["cnf-a"]); err != nil {
		return err
	}
	if err := d.withdrawNetworks(ctx, networks); err != nil {
		return err
	}
	fmt.Fprintln(env.Out, "checked: traffic over both networks from the senders' own addresses; links, networks and allocations gone")
	return nil
}

// newPodConfig installs the PodConfig CRDs, labels the two namespaces, grants the agent its RBAC
// and imports the netecho image into the real node's containerd.
func newPodConfig(ctx context.Context, env *Env, rn *cluster.RealNode) (*podConfig, error) {
	c := env.Cluster
	if err := framework.InstallPodConfigCRDs(ctx, c.RESTConfig); err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = berthv1alpha1.AddToScheme(s)
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	for _, n := range []string{podConfigNS, podConfigOtherNS} {
		if err := framework.EnsureNamespace(ctx, env.Client, n); err != nil {
			return nil, err
		}
		if err := cl.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{podConfigTenantLabel: n}}}, client.Merge); err != nil {
			return nil, err
		}
	}
	role, err := chart.AgentClusterRole(rn.ContainerdSocket)
	if err != nil {
		return nil, err
	}
	if err := framework.PodConfigAgentRBAC(ctx, c, role); err != nil {
		return nil, err
	}
	if err := importNetecho(ctx, rn); err != nil {
		return nil, err
	}
	return &podConfig{env: env, rn: rn, cl: cl}, nil
}

// importNetecho builds the netecho image in a scratch directory and imports it into the real
// node's containerd; the directory goes once the image is in.
func importNetecho(ctx context.Context, rn *cluster.RealNode) error {
	dir, err := os.MkdirTemp("", "berth-demo-netecho-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	img, err := framework.NetechoImage(ctx, dir)
	if err != nil {
		return err
	}
	_, err = rn.Ctr(ctx, "images", "import", img)
	return err
}

// startComponents starts the PodConfig operator and node agent; stop stops both.
func (d *podConfig) startComponents(ctx context.Context) (stop func(), err error) {
	c := d.env.Cluster
	op, err := framework.StartPodConfigOperator(ctx, c, "berth-operator-podconfig")
	if err != nil {
		return nil, err
	}
	agent, err := framework.StartPodConfigAgent(ctx, c, "berth-agent-podconfig")
	if err != nil {
		c.StopComponent(op)
		return nil, err
	}
	return func() { c.StopComponent(agent); c.StopComponent(op) }, nil
}

// startPods runs the two netecho pods, cnf-a and cnf-b, on the real node.
func (d *podConfig) startPods(ctx context.Context) error {
	for _, n := range []string{"cnf-a", "cnf-b"} {
		if err := d.cl.Create(ctx, framework.NetechoPod(podConfigNS, n, d.rn.NodeName, map[string]string{berthv1alpha1.PodConfigLabel: "cnf"})); err != nil {
			return err
		}
	}
	_, err := framework.WaitPods(ctx, d.env.Client, podConfigNS, berthv1alpha1.PodConfigLabel+"=cnf", 2, 90*time.Second, framework.Running)
	return err
}

// grantNetworks creates the two PodNetworks the cluster administrator grants to namespace
// demo-podconfig only, and prints them as the operator accepted them. It returns the networks
// created so far even when it fails, for the caller to delete.
func (d *podConfig) grantNetworks(ctx context.Context) ([]*berthv1alpha1.PodNetwork, error) {
	grant := map[string]string{podConfigTenantLabel: podConfigNS}
	demo1 := framework.NewPodNetwork("demo1", "berth-demo1", "192.168.160.0/24", "192.168.160.1", grant)
	demo1.Spec.MTU = ptr.To[int32](1400)
	networks := []*berthv1alpha1.PodNetwork{demo1, framework.NewPodNetwork("demo2", "berth-demo2", "10.161.0.0/28", "", grant)}
	fmt.Fprintf(d.env.Out, "The cluster administrator grants two PodNetworks to namespaces labelled %s=%s (Berth creates and owns their bridges):\n", podConfigTenantLabel, podConfigNS)
	tw := tabwriter.NewWriter(d.env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  PODNETWORK\tBRIDGE\tCIDR\tGATEWAY\tMTU\tACCEPTED (by the operator)")
	for i, n := range networks {
		got, err := framework.CreatePodNetwork(ctx, d.cl, n, 30*time.Second)
		if err != nil {
			return networks[:i+1], err
		}
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
	return networks, tw.Flush()
}

// refuseUngranted checks that a tenant of a namespace the networks do not grant is refused when
// it names one, with nothing allocated.
func (d *podConfig) refuseUngranted(ctx context.Context) error {
	other := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: podConfigOtherNS, Name: "intruder"},
		Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{{Name: "net1", Network: "demo1"}}}}
	if err := d.cl.Create(ctx, other); err != nil {
		return err
	}
	var refusal *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := d.cl.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
			return false, nil
		}
		refusal = meta.FindStatusCondition(other.Status.Conditions, berthv1alpha1.ConditionDegraded)
		return refusal != nil && refusal.Status == metav1.ConditionTrue && refusal.ObservedGeneration == other.Generation, nil
	})
	if err != nil {
		return fmt.Errorf("PodConfig %s/%s naming a network that does not grant its namespace was not refused: %+v", podConfigOtherNS, other.Name, other.Status)
	}
	fmt.Fprintf(d.env.Out, "PodConfig %s/%s names demo1 from a namespace it does not grant: phase %s, Degraded %s: %s\n",
		podConfigOtherNS, other.Name, other.Status.Phase, refusal.Reason, refusal.Message)
	return d.cl.Delete(ctx, other)
}

// attach creates PodConfig cnf, which attaches both pods to both networks, waits until it is
// configured and prints each attachment as the pod sees it. It returns the PodConfig and each
// pod's primary address.
func (d *podConfig) attach(ctx context.Context) (*berthv1alpha1.PodConfig, map[string]string, error) {
	fmt.Fprintln(d.env.Out, "Two unprivileged pods (uid 65532, no capabilities) on the real node; PodConfig cnf attaches them to both networks:")
	pc := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: podConfigNS, Name: "cnf"},
		Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{
			{Name: "net1", Network: "demo1"},
			{Name: "net2", Network: "demo2"},
		}}}
	if err := d.cl.Create(ctx, pc); err != nil {
		return nil, nil, err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := d.cl.Get(ctx, client.ObjectKeyFromObject(pc), pc); err != nil {
			return false, nil
		}
		return pc.Status.Phase == berthv1alpha1.PodConfigConfigured && pc.Status.ConfiguredCount == 2, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("PodConfig not configured (phase %s): %w", pc.Status.Phase, err)
	}
	podIP := map[string]string{}
	tw := tabwriter.NewWriter(d.env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tINTERFACE (as the pod sees it)\tMTU\tADDRESS\tNETWORK\tHOST PEER\tBRIDGE\tSTATE")
	for _, n := range []string{"cnf-a", "cnf-b"} {
		p := &corev1.Pod{}
		if err := d.cl.Get(ctx, client.ObjectKey{Namespace: podConfigNS, Name: n}, p); err != nil {
			return nil, nil, err
		}
		podIP[n] = p.Status.PodIP
		ifs, err := framework.NetechoInterfaces(ctx, d.rn, p.Status.PodIP)
		if err != nil {
			return nil, nil, err
		}
		for _, en := range pc.Status.Pods {
			if en.Pod == n {
				i := ifs[en.Interface]
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", n, en.Interface, i.MTU, strings.Join(i.Addrs, " "), en.Network, en.HostPeer, en.Bridge, en.State)
			}
		}
	}
	return pc, podIP, tw.Flush()
}

// attachmentAddr is pod's address on attachment att as the PodConfig's status records it; ""
// when it has none.
func attachmentAddr(pc *berthv1alpha1.PodConfig, pod, att string) string {
	for _, en := range pc.Status.Pods {
		if en.Pod == pod && en.Attachment == att {
			return netip.MustParsePrefix(en.Address).Addr().String()
		}
	}
	return ""
}

// checkTraffic has the pods send to each other over each network and checks that every packet
// crossed the attachment: the receiver saw the sender's address on it.
func (d *podConfig) checkTraffic(ctx context.Context, pc *berthv1alpha1.PodConfig, podIP map[string]string) error {
	fmt.Fprintln(d.env.Out, "Traffic between the pods over each network (sent by the pods themselves):")
	for _, t := range []struct{ from, to, att, proto string }{
		{"cnf-a", "cnf-b", "net1", "udp"}, {"cnf-b", "cnf-a", "net1", "tcp"}, {"cnf-a", "cnf-b", "net2", "udp"}, {"cnf-b", "cnf-a", "net2", "tcp"}} {
		var rep framework.NetechoReply
		var err error
		for i := 0; i < 3; i++ {
			if rep, err = framework.NetechoSend(ctx, d.rn, podIP[t.from], t.proto, net.JoinHostPort(attachmentAddr(pc, t.to, t.att), "7777")); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s -> %s over %s: %w", t.from, t.to, t.att, err)
		}
		fmt.Fprintf(d.env.Out, "  %s -> %s over %s (%s): %s answered, saw the sender as %s\n", t.from, t.to, t.att, t.proto, rep.Server, rep.SeenFrom)
		from := attachmentAddr(pc, t.from, t.att)
		if host, _, err := net.SplitHostPort(rep.SeenFrom); err != nil || host != from {
			return fmt.Errorf("PodConfig traffic: %s -> %s over %s was seen from %q, not %s's %s address %s", t.from, t.to, t.att, rep.SeenFrom, t.from, t.att, from)
		}
	}
	return nil
}

// berthLinks lists Berth's links on the real node, those carrying its mark (netlink group
// 4877), with their aliases; "none" when there are none.
func (d *podConfig) berthLinks(ctx context.Context) string {
	out, _ := d.rn.InNetNS(ctx, "ip", "-o", "link", "show", "group", strconv.Itoa(podnet.LinkGroup))
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

// detach deletes the PodConfig and checks that its links leave the node; it prints the
// interfaces the pod at podIP has left.
func (d *podConfig) detach(ctx context.Context, pc *berthv1alpha1.PodConfig, podIP string) error {
	fmt.Fprintf(d.env.Out, "Berth's links on the node (ip link show group %d): %s\n", podnet.LinkGroup, d.berthLinks(ctx))
	if err := d.cl.Delete(ctx, pc); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(d.cl.Get(ctx, client.ObjectKeyFromObject(pc), &berthv1alpha1.PodConfig{})) && d.berthLinks(ctx) == "none", nil
	})
	if err != nil {
		return fmt.Errorf("PodConfig deletion did not remove the links (%s): %w", d.berthLinks(ctx), err)
	}
	ifs, err := framework.NetechoInterfaces(ctx, d.rn, podIP)
	if err != nil {
		return err
	}
	var names []string
	for n := range ifs {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(d.env.Out, "PodConfig deleted: Berth's links on the node: %s; cnf-a's interfaces now: %s\n", d.berthLinks(ctx), strings.Join(names, " "))
	return nil
}

// withdrawNetworks deletes the networks, each once its pool is empty, and checks that no
// PodNetwork or IPAllocation is left.
func (d *podConfig) withdrawNetworks(ctx context.Context, networks []*berthv1alpha1.PodNetwork) error {
	for _, n := range networks {
		if err := framework.DeletePodNetwork(ctx, d.cl, n.Name, 30*time.Second); err != nil {
			return err
		}
	}
	var pnets berthv1alpha1.PodNetworkList
	var pools berthv1alpha1.IPAllocationList
	if err := d.cl.List(ctx, &pnets); err != nil {
		return err
	}
	if err := d.cl.List(ctx, &pools); err != nil {
		return err
	}
	fmt.Fprintf(d.env.Out, "PodNetworks deleted: %d PodNetworks and %d IPAllocations left\n", len(pnets.Items), len(pools.Items))
	if len(pnets.Items)+len(pools.Items) != 0 {
		return fmt.Errorf("PodConfig: %d PodNetworks and %d IPAllocations left after the networks were withdrawn", len(pnets.Items), len(pools.Items))
	}
	return nil
}
