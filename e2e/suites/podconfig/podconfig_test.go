// Package podconfig proves PodConfig end to end on the local cluster's real node: a cluster
// administrator's PodNetworks (decided by the real berth-operator, --podconfig) are bound by a
// tenant's PodConfig in a namespace they grant; the operator allocates, the real berth-agent
// (--podconfig, in the node's network namespace, with exactly the chart's agent RBAC) finds each
// sandbox through containerd's CRI and makes the links, every one marked as Berth's (netlink
// group 4877), and unprivileged netecho pods (non-root, no capabilities) exchange UDP and TCP
// over both networks of a PodConfig. A revoked grant and a deleted PodNetwork take the links
// away again (the network waiting, by its finalizer, until they are gone); the agent never
// removes a link it did not mark. A network whose spec.vlan names an allow-listed parent is
// made where the kernel has 802.1Q and refused per pod where it has not, leaving the node as
// it was either way. Every link and address lives in the harness's network namespace. Needs
// root (real node).
package podconfig

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/berth-sched/berth/pkg/podconfig"
)

const (
	realNode = "berth-real"
	ns       = "cnf"
	pcName   = "cnf"
	// tenantLabel on the namespace is what the suite's networks grant (their namespaceSelector).
	tenantLabel = "berth-e2e-tenant"
	net1, net2  = "e2e1", "e2e2"
	bridge1     = "berth-e2e1"
	bridge2     = "berth-e2e2"
)

// grant is the namespaceSelector labels of the suite's networks: namespace cnf only.
func grant() map[string]string { return map[string]string{tenantLabel: ns} }

// The administrator's two networks: one routed through a gateway on its bridge with an MTU
// and a route, one layer-2 only.
func suiteNetworks() []*berthv1alpha1.PodNetwork {
	n1 := framework.NewPodNetwork(net1, bridge1, "192.168.150.0/24", "192.168.150.1", grant())
	n1.Spec.MTU = ptr.To[int32](1400)
	n1.Spec.Routes = []berthv1alpha1.Route{{Destination: "192.168.250.0/24"}}
	return []*berthv1alpha1.PodNetwork{n1, framework.NewPodNetwork(net2, bridge2, "10.151.0.0/28", "", grant())}
}

type env struct {
	ctx   context.Context
	c     *cluster.Cluster
	rn    *cluster.RealNode
	cl    client.WithWatch
	agent *cluster.Process
	op    *cluster.Process
}

func TestPodConfigRealNode(t *testing.T) {
	framework.NeedRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := framework.StartPodConfigCluster(ctx, t, realNode)
	e := &env{ctx: ctx, c: c, rn: c.RealNode()}
	var err error
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = berthv1alpha1.AddToScheme(s)
	if e.cl, err = client.NewWithWatch(c.RESTConfig, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	if err := e.cl.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: grant()}}, client.Merge); err != nil {
		t.Fatal(err)
	}
	// The agent process runs with exactly the chart's role, so the suite proves the chart
	// grants enough.
	role, err := chart.AgentClusterRole(e.rn.ContainerdSocket)
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.PodConfigAgentRBAC(ctx, c, role); err != nil {
		t.Fatal(err)
	}
	if e.op, err = e.startOperator("berth-operator"); err != nil {
		t.Fatal(err)
	}
	if e.agent, err = e.startAgent("berth-agent"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log tail:\n%s", e.agent.Tail(60))
			t.Logf("operator log tail:\n%s", e.op.Tail(30))
		}
	})
	// The administrator grants the suite's networks to namespace cnf. They go before the
	// cluster stops (this defer runs before c.Stop's), each waiting for its pool to go.
	for _, n := range suiteNetworks() {
		if _, err := framework.CreatePodNetwork(ctx, e.cl, n, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, n := range suiteNetworks() {
			if err := framework.DeletePodNetwork(context.Background(), e.cl, n.Name, 30*time.Second); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	}()

	// Two unprivileged pods first; the node's state with them running, before any PodConfig,
	// is what must be back once the PodConfig is deleted.
	e.createPods(t, "a", "b")
	before, err := framework.NodeNetState(ctx, e.rn)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("two unprivileged pods get both attachments and exchange traffic over each network", e.testTwoPods)
	t.Run("a third pod added later is configured without touching the PodConfig", e.testThirdPod)
	t.Run("deleting a pod frees its addresses", e.testDeletePod)
	t.Run("agent killed mid-apply and restarted converges, nothing leaked, no address twice", e.testAgentKilled)
	t.Run("operator restart keeps allocations", e.testOperatorRestart)
	t.Run("deleting the PodConfig removes every link, bridge and address it created", func(t *testing.T) {
		e.testDeletePodConfig(t, before)
	})
	t.Run("revoking a namespace's grant moves its entries to Removing and the agent removes the links", e.testRevokeGrant)
	t.Run("a deleted PodNetwork waits until the agent removed its links, then its pool goes", e.testDeleteNetwork)
	t.Run("a network with a VLAN of an allow-listed parent, and the node exactly as before once deleted", e.testVLAN)
	t.Run("the agent is not ready until its container runtime answers", e.testReadyNeedsRuntime)
	t.Run("the chart's load-only agent runs unprivileged (uid 65532, no capability)", e.testLoadOnlyUnprivileged)
	t.Run("the chart's PodConfig agent (capabilities, not privileged) configures pods", e.testChartPodConfigAgent)
}

// The tenant's PodConfig: one attachment on each of the administrator's networks.
func podConfigObj() *berthv1alpha1.PodConfig {
	return &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pcName},
		Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{
			{Name: "net1", Network: net1},
			{Name: "net2", Network: net2},
		}}}
}

func (e *env) createPods(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		p := framework.NetechoPod(ns, n, realNode, map[string]string{berthv1alpha1.PodConfigLabel: pcName})
		if err := e.cl.Create(e.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p := &corev1.Pod{}
			if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, p); err != nil {
				return false, nil
			}
			return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
		})
		if err != nil {
			t.Fatalf("pod %s not running: %v", n, err)
		}
	}
}

func (e *env) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitConfigured waits until every entry of the given pods is Configured (and no others
// exist) and returns the PodConfig.
func (e *env) waitConfigured(t *testing.T, pods ...string) *berthv1alpha1.PodConfig {
	t.Helper()
	var pc berthv1alpha1.PodConfig
	var last string
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: pcName}, &pc); err != nil {
			return false, nil
		}
		var states []string
		ok := len(pc.Status.Pods) == 2*len(pods)
		for _, en := range pc.Status.Pods {
			states = append(states, fmt.Sprintf("%s/%s=%s %s", en.Pod, en.Attachment, en.State, en.LastError))
			if en.State != berthv1alpha1.AttachmentConfigured || !slices.Contains(pods, en.Pod) {
				ok = false
			}
		}
		last = fmt.Sprintf("phase %s, configured %d, entries %v", pc.Status.Phase, pc.Status.ConfiguredCount, states)
		return ok && pc.Status.Phase == berthv1alpha1.PodConfigConfigured && int(pc.Status.ConfiguredCount) == len(pods), nil
	})
	if err != nil {
		t.Fatalf("pods %v not configured: %s", pods, last)
	}
	return &pc
}

func entry(pc *berthv1alpha1.PodConfig, pod, att string) berthv1alpha1.PodAttachmentStatus {
	for _, en := range pc.Status.Pods {
		if en.Pod == pod && en.Attachment == att {
			return en
		}
	}
	return berthv1alpha1.PodAttachmentStatus{}
}

func ipOf(cidr string) string { return netip.MustParsePrefix(cidr).Addr().String() }

// checkInterfaces asks the pod itself (netecho /interfaces) for its attachments.
func (e *env) checkInterfaces(t *testing.T, pc *berthv1alpha1.PodConfig, pod string) {
	t.Helper()
	p := e.pod(t, pod)
	ifs, err := framework.NetechoInterfaces(e.ctx, e.rn, p.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		name, network, bridge string
		mtu                   int
	}{{"net1", net1, bridge1, 1400}, {"net2", net2, bridge2, 1500}} {
		en := entry(pc, pod, a.name)
		got, ok := ifs[a.name]
		if !ok {
			t.Errorf("pod %s has no %s: %v", pod, a.name, ifs)
			continue
		}
		if !got.Up || got.MTU != a.mtu || !slices.Contains(got.Addrs, en.Address) {
			t.Errorf("pod %s %s: %+v, want up, mtu %d, address %s", pod, a.name, got, a.mtu, en.Address)
		}
		if en.Interface != a.name || en.HostPeer != podconfig.HostPeerName(string(p.UID), a.name) || en.Bridge != a.bridge ||
			en.Network != a.network || en.Node != realNode {
			t.Errorf("status entry %+v", en)
		}
	}
}

// exchange makes from send to to's address on att, over proto, and checks the peer saw the
// sender's attachment address (the traffic took that network).
func (e *env) exchange(t *testing.T, pc *berthv1alpha1.PodConfig, from, to, att, proto string) {
	t.Helper()
	src, dst := ipOf(entry(pc, from, att).Address), ipOf(entry(pc, to, att).Address)
	var rep framework.NetechoReply
	var err error
	// why: the first datagram may race ARP on a fresh bridge; netecho's own timeout is 2 s.
	for i := 0; i < 3; i++ {
		if rep, err = framework.NetechoSend(e.ctx, e.rn, e.pod(t, from).Status.PodIP, proto, net.JoinHostPort(dst, "7777")); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("%s -> %s over %s (%s): %v", from, to, att, proto, err)
	}
	host, _, _ := net.SplitHostPort(rep.SeenFrom)
	if host != src || rep.Server != to {
		t.Errorf("%s -> %s over %s (%s): answered by %s, seen from %s; want %s seen from %s", from, to, att, proto, rep.Server, rep.SeenFrom, to, src)
	}
}

func (e *env) testTwoPods(t *testing.T) {
	if err := e.cl.Create(e.ctx, podConfigObj()); err != nil {
		t.Fatal(err)
	}
	pc := e.waitConfigured(t, "a", "b")
	for _, p := range []string{"a", "b"} {
		e.checkInterfaces(t, pc, p)
	}
	for _, att := range []string{"net1", "net2"} {
		e.exchange(t, pc, "a", "b", att, "udp")
		e.exchange(t, pc, "b", "a", att, "tcp")
	}
	// The routed network reaches the node through the gateway on the bridge; the route of the
	// spec is in the pod (netecho cannot list routes, so check the node side of it: the
	// bridge carries the gateway).
	out, err := e.rn.InNetNS(e.ctx, "ip", "-o", "addr", "show", "dev", bridge1)
	if err != nil || !strings.Contains(out, "192.168.150.1/24") {
		t.Errorf("bridge %s addresses %q (%v), want the gateway 192.168.150.1/24", bridge1, out, err)
	}
	// Every link the agent made carries its mark (group 4877) and an alias saying what it is:
	// the two bridges and the four host peers, and nothing else is marked.
	marked := e.markedLinks(t)
	want := append([]string{bridge1, bridge2}, e.wantPeers(t)...)
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(marked)); !slices.Equal(got, want) {
		t.Errorf("links marked group %d: %v, want exactly %v", podnet.LinkGroup, got, want)
	}
	for name, alias := range marked {
		wantAlias := podnet.PeerAliasPref + ns + "/"
		if name == bridge1 || name == bridge2 {
			wantAlias = podnet.BridgeAlias
		}
		if !strings.HasPrefix(alias, wantAlias) {
			t.Errorf("link %s alias %q, want %q...", name, alias, wantAlias)
		}
	}
	// The agent's entries are its own: the API server records the node's field manager.
	var managers []string
	for _, m := range pc.ManagedFields {
		managers = append(managers, m.Manager+"/"+m.Subresource)
	}
	if !slices.Contains(managers, berthv1alpha1.PodConfigAgentFieldManagerPrefix+realNode+"/status") {
		t.Errorf("managers %v, want %s%s on status", managers, berthv1alpha1.PodConfigAgentFieldManagerPrefix, realNode)
	}
}

func (e *env) testThirdPod(t *testing.T) {
	var before berthv1alpha1.PodConfig
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: pcName}, &before); err != nil {
		t.Fatal(err)
	}
	e.createPods(t, "c")
	pc := e.waitConfigured(t, "a", "b", "c")
	if pc.Generation != before.Generation {
		t.Errorf("generation %d -> %d: the PodConfig was touched", before.Generation, pc.Generation)
	}
	e.checkInterfaces(t, pc, "c")
	e.exchange(t, pc, "c", "a", "net1", "udp")
	e.exchange(t, pc, "a", "c", "net2", "tcp")
}

// allocations lists every (address -> podUID/attachment) of every IPAllocation, failing on an
// address held twice or an owner holding two addresses in one network.
func (e *env) allocations(t *testing.T) map[string]string {
	t.Helper()
	var list berthv1alpha1.IPAllocationList
	if err := e.cl.List(e.ctx, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, al := range list.Items {
		owners := map[string]string{}
		for _, a := range al.Spec.Allocations {
			key := al.Name + " " + a.Address
			if prev, dup := out[key]; dup {
				t.Errorf("address %s given twice: %s and %s/%s", key, prev, a.PodUID, a.Attachment)
			}
			o := a.PodUID + "/" + a.Attachment
			if prev, dup := owners[o]; dup {
				t.Errorf("%s holds two addresses in %s: %s and %s", o, al.Spec.CIDR, prev, a.Address)
			}
			owners[o] = a.Address
			out[key] = o
		}
	}
	return out
}

// markedLinks lists the node's links carrying the agent's mark (name → alias).
func (e *env) markedLinks(t *testing.T) map[string]string {
	t.Helper()
	out, err := e.rn.InNetNS(e.ctx, "ip", "-o", "link", "show", "group", strconv.Itoa(podnet.LinkGroup))
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		alias := ""
		if _, a, ok := strings.Cut(l, " alias "); ok {
			a, _, _ = strings.Cut(a, "\\") // -o joins a link's lines with a backslash
			alias = strings.TrimSpace(a)
		}
		links[name] = alias
	}
	return links
}

// hostPeers are the host ends of pods' veths on the node: the marked links named like one.
func (e *env) hostPeers(t *testing.T) []string {
	t.Helper()
	var peers []string
	for name := range e.markedLinks(t) {
		if podnet.IsHostPeerName(name) {
			peers = append(peers, name)
		}
	}
	slices.Sort(peers)
	return peers
}

// wantPeers are the host peers the live entries account for.
func (e *env) wantPeers(t *testing.T) []string {
	t.Helper()
	var pc berthv1alpha1.PodConfig
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: pcName}, &pc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, en := range pc.Status.Pods {
		out = append(out, podconfig.HostPeerName(en.PodUID, en.Attachment))
	}
	slices.Sort(out)
	return out
}

func (e *env) deletePod(t *testing.T, name string) {
	t.Helper()
	p := e.pod(t, name)
	if err := e.cl.Delete(e.ctx, p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod %s not deleted: %v", name, err)
	}
}

func (e *env) testDeletePod(t *testing.T) {
	uid := string(e.pod(t, "c").UID)
	e.deletePod(t, "c")
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, o := range e.allocations(t) {
			if strings.HasPrefix(o, uid+"/") {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("addresses of the deleted pod %s still allocated: %v", uid, e.allocations(t))
	}
	e.waitConfigured(t, "a", "b")
	for _, att := range []string{"net1", "net2"} {
		if hp := podconfig.HostPeerName(uid, att); slices.Contains(e.hostPeers(t), hp) {
			t.Errorf("host peer %s of the deleted pod left on the node", hp)
		}
	}
}

func (e *env) testAgentKilled(t *testing.T) {
	// Leftovers a crash could leave and a dead node comes back with, marked as the agent marks
	// at creation: a host peer no allocation accounts for (its pod is long gone) and a bridge
	// caught between creation and naming. The restarted agent's sweep must remove both. Their
	// unmarked look-alikes (an administrator's links that happen to match the names) must be
	// left exactly as they are: the agent never deletes a link without its mark.
	group := strconv.Itoa(podnet.LinkGroup)
	stalePeer, staleBridge := podconfig.HostPeerName("uid-of-a-pod-long-gone", "net1"), "bt0123456789abc"
	foreignPeer, foreignBridge := podconfig.HostPeerName("uid-of-an-admins-link", "net1"), "bt0123456789abd"
	for _, cmd := range [][]string{
		{"link", "add", stalePeer, "group", group, "type", "veth", "peer", "name", "e2estalepeer"},
		{"link", "add", staleBridge, "group", group, "type", "bridge"},
		{"link", "add", foreignPeer, "type", "veth", "peer", "name", "e2eforeignpeer"},
		{"link", "add", foreignBridge, "type", "bridge"},
	} {
		if out, err := e.rn.InNetNS(e.ctx, "ip", cmd...); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	defer func() {
		for _, l := range []string{foreignPeer, foreignBridge} {
			_, _ = e.rn.InNetNS(context.Background(), "ip", "link", "del", l)
		}
	}()
	// Kill the agent with SIGKILL at random points while two new pods are being configured,
	// several times, then let it run.
	for _, n := range []string{"d", "e"} {
		p := framework.NetechoPod(ns, n, realNode, map[string]string{berthv1alpha1.PodConfigLabel: pcName})
		if err := e.cl.Create(e.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for i, delay := range []time.Duration{300 * time.Millisecond, 1100 * time.Millisecond, 50 * time.Millisecond, 700 * time.Millisecond} {
		time.Sleep(delay)
		if err := syscall.Kill(e.agent.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-e.agent.Done()
		e.c.StopComponent(e.agent)
		var err error
		if e.agent, err = e.startAgent(fmt.Sprintf("berth-agent-%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	pc := e.waitConfigured(t, "a", "b", "d", "e")
	e.allocations(t) // fails on an address given twice
	// Every address in the status is the allocation's, and distinct.
	seen := map[string]string{}
	for _, en := range pc.Status.Pods {
		if prev, dup := seen[en.Address]; dup {
			t.Errorf("address %s reported for %s and %s/%s", en.Address, prev, en.Pod, en.Attachment)
		}
		seen[en.Address] = en.Pod + "/" + en.Attachment
	}
	for _, p := range []string{"d", "e"} {
		e.checkInterfaces(t, pc, p)
	}
	e.exchange(t, pc, "d", "e", "net1", "udp")
	err := wait.PollUntilContextTimeout(e.ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		out, _ := e.rn.InNetNS(ctx, "ip", "-o", "link", "show")
		return slices.Equal(e.hostPeers(t), e.wantPeers(t)) && !strings.Contains(out, staleBridge), nil
	})
	if err != nil {
		t.Errorf("host peers %v, want exactly %v (the stale ones swept); links:\n%s", e.hostPeers(t), e.wantPeers(t), func() string {
			out, _ := e.rn.InNetNS(e.ctx, "ip", "-o", "link", "show")
			return out
		}())
	}
	// The sweeps that took the marked leftovers left the unmarked look-alikes alone.
	for _, l := range []string{foreignPeer, foreignBridge} {
		if out, err := e.rn.InNetNS(e.ctx, "ip", "-o", "link", "show", "dev", l); err != nil {
			t.Errorf("the unmarked link %s was removed by the agent: %v %s", l, err, out)
		}
	}
	e.deletePod(t, "d")
	e.deletePod(t, "e")
	e.waitConfigured(t, "a", "b")
}

func (e *env) testOperatorRestart(t *testing.T) {
	before := e.allocations(t)
	pcBefore := e.waitConfigured(t, "a", "b")
	e.c.StopComponent(e.op)
	var err error
	if e.op, err = e.startOperator("berth-operator-2"); err != nil {
		t.Fatal(err)
	}
	// A new pod makes the new operator reconcile and allocate next to the kept addresses.
	e.createPods(t, "f")
	pc := e.waitConfigured(t, "a", "b", "f")
	after := e.allocations(t)
	for k, o := range before {
		if after[k] != o {
			t.Errorf("allocation %s was %s, now %q", k, o, after[k])
		}
	}
	for _, p := range []string{"a", "b"} {
		for _, att := range []string{"net1", "net2"} {
			if entry(pc, p, att).Address != entry(pcBefore, p, att).Address {
				t.Errorf("%s/%s address %s -> %s", p, att, entry(pcBefore, p, att).Address, entry(pc, p, att).Address)
			}
		}
	}
	e.exchange(t, pc, "f", "a", "net2", "udp")
	e.deletePod(t, "f")
	e.waitConfigured(t, "a", "b")
}

func (e *env) testDeletePodConfig(t *testing.T, before []string) {
	pc := &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pcName}}
	if err := e.cl.Delete(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(pc), &berthv1alpha1.PodConfig{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("PodConfig not gone (finalizer): %v", err)
	}
	// The pools live as long as their networks, which still exist: every one is empty.
	var list berthv1alpha1.IPAllocationList
	if err := e.cl.List(e.ctx, &list); err != nil {
		t.Fatal(err)
	}
	for _, al := range list.Items {
		if len(al.Spec.Allocations) != 0 {
			t.Errorf("IPAllocation %s still allocates %+v", al.Name, al.Spec.Allocations)
		}
	}
	var after []string
	var stateErr error
	err = wait.PollUntilContextTimeout(e.ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		after, stateErr = framework.NodeNetState(ctx, e.rn)
		return stateErr == nil && slices.Equal(after, before), nil
	})
	if err != nil {
		t.Errorf("the node's links and addresses differ from before the PodConfig (%v):\nbefore:\n%s\nafter:\n%s",
			stateErr, strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	for _, p := range []string{"a", "b"} {
		ifs, err := framework.NetechoInterfaces(e.ctx, e.rn, e.pod(t, p).Status.PodIP)
		if err != nil {
			t.Fatal(err)
		}
		for name := range ifs {
			if name != "lo" && name != "eth0" {
				t.Errorf("pod %s still has %s", p, name)
			}
		}
	}
}
