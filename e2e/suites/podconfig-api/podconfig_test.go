// Package podconfigapi runs the real berth-operator (--podconfig) against the local cluster's
// real API server with KWOK nodes: the PodConfig, PodNetwork and IPAllocation CRDs and their
// CEL rules; PodNetworks decided by the operator (refusals naming the field and the rule: host
// interfaces, the bridge prefix, configured and discovered cluster ranges, node networks,
// parents, older networks' bridge, range and VLAN; a refused network claims nothing);
// PodConfigs bound only to accepted networks that grant their namespace (refused in Degraded,
// nothing allocated); allocations for scheduled pods persisted in the network's IPAllocation
// and freed when pods or the PodConfig go; a revoked grant and a deleted network moving
// entries to Removing and holding addresses (and the network, by its finalizer) until the
// agents confirm; per-node status entries server-side-applied the way node agents do; an
// operator killed and replaced without an address re-issued; and two operators (no leader
// election) racing without handing one address out twice.
package podconfigapi

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/podconfig"
)

const (
	nsA = "tenant-a"
	nsB = "tenant-b"
	// clusterCIDRs is only the pod range: the service range (10.96.0.0/16) must be refused
	// through the API server's ServiceCIDR object, which the operator discovers.
	clusterCIDRs = "10.244.0.0/16"
	// nodeNetworks is what the chart's podConfig.nodeNetworks would say.
	nodeNetworks = "172.30.0.0/16"
	// n2PodCIDR is set on node n2 as a controller-manager allocating node CIDRs would: outside
	// every configured range, so only discovery can refuse it.
	n2PodCIDR  = "10.250.2.0/24"
	vlanParent = "e2evlan0"
	// teamLabel on each tenant namespace is what the networks' grants select.
	teamLabel = "team"
)

type env struct {
	t   *testing.T
	ctx context.Context
	c   *cluster.Cluster
	cl  client.Client
	dyn dynamic.Interface
	ops []*cluster.Process
}

func TestPodConfigAPI(t *testing.T) {
	checkTemp := framework.IsolateTemp()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{Logf: t.Logf, WithoutDefaultScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if err := checkTemp(); err != nil {
			t.Error(err)
		}
	})
	// n2's pod range is one the operator is not configured with: what it refuses there it
	// discovered.
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: "n1"}, cluster.NodeSpec{Name: "n2", PodCIDR: n2PodCIDR}); err != nil {
		t.Fatal(err)
	}
	if err := framework.InstallPodConfigCRDs(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	cl := framework.PodConfigClient(t, c)
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, c: c, cl: cl, dyn: dyn}
	for ns, team := range map[string]string{nsA: "a", nsB: "b"} {
		if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
			t.Fatal(err)
		}
		if err := cl.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{teamLabel: team}}}, client.Merge); err != nil {
			t.Fatal(err)
		}
	}
	op := e.startOperator("berth-operator-1")

	t.Run("API server refuses malformed PodConfigs and PodNetworks naming the field", e.testCEL)
	t.Run("operator refuses hostile PodNetworks in status naming the field; the older network keeps its bridge, range and VLAN", e.testNetworkPolicy)
	t.Run("a refused network claims nothing", e.testRefusedClaimsNothing)
	t.Run("a PodConfig binds only accepted networks that grant its namespace, else nothing is allocated", e.testBind)
	t.Run("a PodConfig cannot reach pods of another namespace", e.testNamespaced)
	t.Run("allocations follow pods; exhaustion fails the entry until an address is freed", e.testAllocations)
	t.Run("operator killed and replaced keeps allocations and never re-issues an address", func(t *testing.T) {
		e.testRestart(t, op)
	})
	t.Run("two operators racing never hand out one address twice", e.testRace)
	t.Run("agents' per-node reports and PodConfig deletion through the finalizer", e.testAgentsAndDeletion)
	t.Run("a revoked grant moves entries to Removing; addresses are freed once the agents confirm", e.testRevokeGrant)
	t.Run("a deleted PodNetwork waits for its attachments to be removed, then its pool goes", e.testDeleteNetwork)
	t.Run("the chart's admission policy limits each agent to its own node's entries", e.testAgentPolicy)
}

// startOperator runs bin/berth-operator with the PodConfig controller and no leader election
// (so two can race) and waits until it is ready.
func (e *env) startOperator(name string) *cluster.Process {
	e.t.Helper()
	port, err := cluster.FreePort()
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := e.c.StartComponent(e.ctx, cluster.ProcessSpec{
		Name:   name,
		Binary: filepath.Join(e.c.BinDir, "berth-operator"),
		Args: []string{"--kubeconfig=" + e.c.Kubeconfig, "--leader-elect=false", "--metrics-bind-address=0",
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", port),
			"--podconfig", "--podconfig-cluster-cidrs=" + clusterCIDRs, "--podconfig-node-networks=" + nodeNetworks,
			"--podconfig-allowed-parents=" + vlanParent, "--zap-log-level=debug"},
	}, cluster.HTTPCheck(fmt.Sprintf("http://127.0.0.1:%d/readyz", port)))
	if err != nil {
		e.t.Fatal(err)
	}
	e.ops = append(e.ops, p)
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("%s log tail:\n%s", name, p.Tail(40))
		}
	})
	return p
}

func pcObj(ns, name string, atts ...berthv1alpha1.NetworkAttachment) *berthv1alpha1.PodConfig {
	return &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: atts}}
}

func att(name, network string) berthv1alpha1.NetworkAttachment {
	return berthv1alpha1.NetworkAttachment{Name: name, Network: network}
}

func team(t string) map[string]string { return map[string]string{teamLabel: t} }

// network creates an accepted PodNetwork and deletes it when owner ends (after whatever owner
// created later: cleanups run last first); the deletion waits for the network and its pool to
// go, which needs every address of it freed.
func (e *env) network(owner *testing.T, pn *berthv1alpha1.PodNetwork) *berthv1alpha1.PodNetwork {
	owner.Helper()
	got, err := framework.CreatePodNetwork(e.ctx, e.cl, pn, 30*time.Second)
	e.cleanupNetwork(owner, pn.Name)
	if err != nil {
		owner.Fatal(err)
	}
	return got
}

func (e *env) cleanupNetwork(owner *testing.T, name string) {
	owner.Cleanup(func() {
		// why: e.ctx is cancelled when the top-level test function returns, before cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := framework.DeletePodNetwork(ctx, e.cl, name, 25*time.Second); err != nil {
			owner.Errorf("cleanup: %v", err)
		}
	})
}

// createPC creates pc and deletes it (waiting for its finalizer) when owner ends.
func (e *env) createPC(owner *testing.T, pc *berthv1alpha1.PodConfig) {
	owner.Helper()
	framework.CreatePodConfig(e.ctx, owner, e.cl, pc, 30*time.Second)
}

// createPods creates n pods alternately on n1 and n2 and deletes them when owner ends.
func (e *env) createPods(owner *testing.T, ns, prefix string, n int, labels map[string]string) []*corev1.Pod {
	owner.Helper()
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		spec := framework.PodSpec("", "", "")
		spec.NodeName = []string{"n1", "n2"}[i%2]
		p := framework.Pod(ns, fmt.Sprintf("%s-%d", prefix, i), labels, spec)
		if err := e.cl.Create(e.ctx, p); err != nil {
			owner.Fatal(err)
		}
		out = append(out, p)
		owner.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := e.removePod(ctx, p); err != nil {
				owner.Errorf("cleanup: %v", err)
			}
		})
	}
	return out
}

func (e *env) removePod(ctx context.Context, p *corev1.Pod) error {
	if err := e.cl.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 25*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(e.cl.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})), nil
	})
	if err != nil {
		return fmt.Errorf("pod %s not deleted: %w", p.Name, err)
	}
	return nil
}

func (e *env) deletePod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if err := e.removePod(e.ctx, p); err != nil {
		t.Fatal(err)
	}
}

func (e *env) waitPC(t *testing.T, ns, name, what string, ok func(*berthv1alpha1.PodConfig) bool) *berthv1alpha1.PodConfig {
	t.Helper()
	return framework.WaitPodConfig(e.ctx, t, e.cl, ns, name, what, 45*time.Second, ok)
}

// pool returns the IPAllocation of the network as address → allocation (nil if absent).
func (e *env) pool(t *testing.T, network string) map[string]berthv1alpha1.Allocation {
	t.Helper()
	obj := &berthv1alpha1.IPAllocation{}
	err := e.cl.Get(e.ctx, client.ObjectKey{Name: network}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]berthv1alpha1.Allocation{}
	for _, a := range obj.Spec.Allocations {
		out[a.Address] = a
	}
	return out
}

func (e *env) waitPool(t *testing.T, network, what string, ok func(map[string]berthv1alpha1.Allocation) bool) map[string]berthv1alpha1.Allocation {
	t.Helper()
	var last map[string]berthv1alpha1.Allocation
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		last = e.pool(t, network)
		return ok(last), nil
	})
	if err != nil {
		t.Fatalf("IPAllocation %s: %s: %v; last %v", network, what, err, last)
	}
	return last
}

// heldBy counts the addresses of network held for PodConfig ns/name.
func (e *env) heldBy(t *testing.T, network, ns, name string) int {
	t.Helper()
	n := 0
	for _, a := range e.pool(t, network) {
		if a.PodNamespace == ns && a.PodConfig == name {
			n++
		}
	}
	return n
}

func condition(pc *berthv1alpha1.PodConfig, typ string) *metav1.Condition {
	return meta.FindStatusCondition(pc.Status.Conditions, typ)
}

func countState(pc *berthv1alpha1.PodConfig, s berthv1alpha1.AttachmentState) int {
	n := 0
	for _, p := range pc.Status.Pods {
		if p.State == s {
			n++
		}
	}
	return n
}

// degradedSpec waits until the PodConfig's current generation is refused: Degraded=True with
// reason InvalidSpec.
func (e *env) degradedSpec(t *testing.T, ns, name, what string, extra func(*berthv1alpha1.PodConfig) bool) *berthv1alpha1.PodConfig {
	t.Helper()
	return e.waitPC(t, ns, name, what, func(pc *berthv1alpha1.PodConfig) bool {
		c := condition(pc, berthv1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "InvalidSpec" && c.ObservedGeneration == pc.Generation &&
			pc.Status.Phase == berthv1alpha1.PodConfigFailed && (extra == nil || extra(pc))
	})
}

// afterCreationSecond waits until the clock is past the second pn was created in: creation
// timestamps have second precision and networks of the same second are ordered by name, so
// a network meant to be newer than pn must be created in a later second.
func afterCreationSecond(pn *berthv1alpha1.PodNetwork) {
	if d := time.Until(pn.CreationTimestamp.Add(1100 * time.Millisecond)); d > 0 {
		time.Sleep(d)
	}
}

func (e *env) testCEL(t *testing.T) {
	pcs := e.dyn.Resource(berthv1alpha1.GroupVersion.WithResource("podconfigs")).Namespace(nsA)
	pns := e.dyn.Resource(berthv1alpha1.GroupVersion.WithResource("podnetworks"))
	create := func(o client.Object) func() error { return func() error { return e.cl.Create(e.ctx, o) } }
	pn := func(name string, mut func(*berthv1alpha1.PodNetworkSpec)) client.Object {
		n := framework.NewPodNetwork(name, "berth-cel", "192.168.60.0/24", "", nil)
		mut(&n.Spec)
		return n
	}
	strict := func(ri dynamic.ResourceInterface, obj map[string]any) func() error {
		return func() error {
			_, err := ri.Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldValidation: "Strict"})
			return err
		}
	}
	// An accepted network whose bridge, range, gateway and VLAN then cannot change.
	immutable := e.network(t, framework.NewPodNetwork("cel-immutable", "berth-celim", "192.168.61.0/24", "192.168.61.1", team("a")))
	update := func(mut func(*berthv1alpha1.PodNetworkSpec)) func() error {
		return func() error {
			n := immutable.DeepCopy()
			mut(&n.Spec)
			return e.cl.Update(e.ctx, n)
		}
	}
	cases := []struct {
		name    string
		write   func() error
		invalid bool // a typed write: the API server answers 422 Invalid; strict decoding answers 400
		wantMsg string
	}{
		{"16-character interface name", create(pcObj(nsA, "cel-0", att("abcdefghijklmnop", "web"))), true, "spec.networkAttachments[0].name"},
		{"eth0 as interface name", create(pcObj(nsA, "cel-1", att("eth0", "web"))), true, "eth0 and lo are reserved"},
		{"network not a DNS name", create(pcObj(nsA, "cel-2", att("net1", "Blue_Net"))), true, "spec.networkAttachments[0].network"},
		{"two attachments on one network", create(pcObj(nsA, "cel-3", att("net1", "web"), att("net2", "web"))), true, "cannot join the same network"},
		{"an attachment naming a bridge and a range (the fields tenants lost)", strict(pcs, map[string]any{
			"apiVersion": "berth.dev/v1alpha1", "kind": "PodConfig", "metadata": map[string]any{"name": "cel-4", "namespace": nsA},
			"spec": map[string]any{"networkAttachments": []any{map[string]any{"name": "net1", "network": "web", "master": "cni0", "cidr": "10.244.0.0/16"}}},
		}), false, `unknown field "spec.networkAttachments[0].master"`},
		{"PodNetwork without namespaceSelector", strict(pns, map[string]any{
			"apiVersion": "berth.dev/v1alpha1", "kind": "PodNetwork", "metadata": map[string]any{"name": "cel-5"},
			"spec": map[string]any{"bridge": "berth-cel", "cidr": "192.168.60.0/24"},
		}), true, "spec.namespaceSelector: Required value"},
		{"cidr not a network address", create(pn("cel-6", func(s *berthv1alpha1.PodNetworkSpec) { s.CIDR = "192.168.60.7/24" })), true, "no host bits"},
		{"cidr malformed", create(pn("cel-7", func(s *berthv1alpha1.PodNetworkSpec) { s.CIDR = "192.168.60.0/33" })), true, "must be a CIDR"},
		{"gateway outside cidr", create(pn("cel-8", func(s *berthv1alpha1.PodNetworkSpec) { s.Gateway = "192.168.61.1" })), true, "gateway must be inside cidr"},
		{"gateway is the network address", create(pn("cel-9", func(s *berthv1alpha1.PodNetworkSpec) { s.Gateway = "192.168.60.0" })), true, "gateway cannot be the network address"},
		{"loopback range", create(pn("cel-10", func(s *berthv1alpha1.PodNetworkSpec) { s.CIDR = "127.1.0.0/16" })), true, "overlaps loopback"},
		{"the cloud metadata address's range", create(pn("cel-11", func(s *berthv1alpha1.PodNetworkSpec) { s.CIDR = "169.254.169.0/24" })), true, "overlaps link-local"},
		{"multicast range", create(pn("cel-12", func(s *berthv1alpha1.PodNetworkSpec) { s.CIDR = "224.1.0.0/16" })), true, "overlaps multicast"},
		{"a default route as range", create(pn("cel-13", func(s *berthv1alpha1.PodNetworkSpec) { s.CIDR = "0.0.0.0/0" })), true, "at most a /8"},
		{"a route to the metadata address", create(pn("cel-14", func(s *berthv1alpha1.PodNetworkSpec) {
			s.Routes = []berthv1alpha1.Route{{Destination: "169.254.169.254/32"}}
		})), true, "never routed through an attachment"},
		{"a default route through the network", create(pn("cel-15", func(s *berthv1alpha1.PodNetworkSpec) {
			s.Routes = []berthv1alpha1.Route{{Destination: "0.0.0.0/0"}}
		})), true, "default routes"},
		{"VLAN 4095", create(pn("cel-16", func(s *berthv1alpha1.PodNetworkSpec) {
			s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 4095, Parent: vlanParent}
		})), true, "spec.vlan.id"},
		{"VXLAN with a unicast group", create(pn("cel-19", func(s *berthv1alpha1.PodNetworkSpec) {
			s.VXLAN = &berthv1alpha1.PodNetworkVXLAN{VNI: 10, Parent: vlanParent, Group: "10.0.0.1"}
		})), true, "must be an IPv4 multicast group"},
		{"VXLAN VNI past 24 bits", create(pn("cel-20", func(s *berthv1alpha1.PodNetworkSpec) {
			s.VXLAN = &berthv1alpha1.PodNetworkVXLAN{VNI: 1 << 24, Parent: vlanParent, Group: "239.1.1.1"}
		})), true, "spec.vxlan.vni"},
		{"VLAN and VXLAN at once", create(pn("cel-21", func(s *berthv1alpha1.PodNetworkSpec) {
			s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 7, Parent: vlanParent}
			s.VXLAN = &berthv1alpha1.PodNetworkVXLAN{VNI: 10, Parent: vlanParent, Group: "239.1.1.1"}
		})), true, "a VLAN or a VXLAN, not both"},
		{"an accepted network's VXLAN added", update(func(s *berthv1alpha1.PodNetworkSpec) {
			s.VXLAN = &berthv1alpha1.PodNetworkVXLAN{VNI: 10, Parent: vlanParent, Group: "239.1.1.1"}
		}), true, "immutable"},
		{"bridge not an interface name", create(pn("cel-17", func(s *berthv1alpha1.PodNetworkSpec) { s.Bridge = "Berth_0" })), true, "spec.bridge"},
		{"MTU below 68", create(pn("cel-18", func(s *berthv1alpha1.PodNetworkSpec) { s.MTU = ptr.To[int32](60) })), true, "spec.mtu"},
		{"an accepted network's range changed", update(func(s *berthv1alpha1.PodNetworkSpec) { s.CIDR = "192.168.62.0/24" }), true, "immutable"},
		{"an accepted network's bridge changed", update(func(s *berthv1alpha1.PodNetworkSpec) { s.Bridge = "berth-other" }), true, "immutable"},
		{"an accepted network's gateway removed", update(func(s *berthv1alpha1.PodNetworkSpec) { s.Gateway = "" }), true, "immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write()
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) || (tc.invalid && !apierrors.IsInvalid(err)) {
				t.Fatalf("want a refusal containing %q (Invalid: %v), got %v", tc.wantMsg, tc.invalid, err)
			}
		})
	}
	// The grant is not immutable: an administrator widens or narrows it in place.
	n := &berthv1alpha1.PodNetwork{}
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: immutable.Name}, n); err != nil {
		t.Fatal(err)
	}
	n.Spec.NamespaceSelector = metav1.LabelSelector{MatchLabels: team("b")}
	if err := e.cl.Update(e.ctx, n); err != nil {
		t.Fatalf("changing the grant was refused: %v", err)
	}
}

// refusal is what an operator refusal of a PodNetwork must name.
type refusal struct{ field, msg string }

// waitRefused waits for the operator's decision on name and checks it is Accepted=False
// naming every want, with Ready=False, and that the network has no pool.
func (e *env) waitRefused(t *testing.T, name string, want ...refusal) *metav1.Condition {
	t.Helper()
	pn, c, err := framework.WaitPodNetworkDecided(e.ctx, e.cl, name, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != metav1.ConditionFalse || c.Reason != "Refused" {
		t.Fatalf("PodNetwork %s: Accepted %s %s: %s; want False, Refused", name, c.Status, c.Reason, c.Message)
	}
	for _, w := range want {
		if !strings.Contains(c.Message, w.field) || !strings.Contains(c.Message, w.msg) {
			t.Errorf("PodNetwork %s refused with %q; want it to name %s (%q)", name, c.Message, w.field, w.msg)
		}
	}
	if r := meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse {
		t.Errorf("refused PodNetwork %s Ready %+v, want False", name, r)
	}
	if p := e.pool(t, name); p != nil {
		t.Errorf("refused PodNetwork %s has a pool: %v", name, p)
	}
	return c
}

// waitAccepted waits until name is Accepted=True: a decision can change without a spec change
// (an older network refused or gone), so this polls the condition itself.
func (e *env) waitAccepted(t *testing.T, name string) {
	t.Helper()
	var c *metav1.Condition
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		_, c, err = framework.WaitPodNetworkDecided(ctx, e.cl, name, 30*time.Second)
		return err == nil && c.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatalf("PodNetwork %s not accepted: %+v", name, c)
	}
}

func (e *env) testNetworkPolicy(t *testing.T) {
	// An accepted, older network; the last cases clash with its bridge, range and VLAN.
	owner := framework.NewPodNetwork("owner", "berth-p0", "192.168.70.0/24", "192.168.70.1", team("b"))
	owner.Spec.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 7, Parent: vlanParent}
	got := e.network(t, owner)
	afterCreationSecond(got)
	spec := func(bridge, cidr string, mut ...func(*berthv1alpha1.PodNetworkSpec)) berthv1alpha1.PodNetworkSpec {
		s := framework.NewPodNetwork("", bridge, cidr, "", team("b")).Spec
		for _, m := range mut {
			m(&s)
		}
		return s
	}
	cases := []struct {
		name string
		spec berthv1alpha1.PodNetworkSpec
		want []refusal
	}{
		{"host interface eth0 as bridge", spec("eth0", "192.168.71.0/24"), []refusal{{"spec.bridge", "host or CNI interface"}, {"spec.bridge", `prefix "berth"`}}},
		{"CNI bridge cni0 as bridge", spec("cni0", "192.168.71.0/24"), []refusal{{"spec.bridge", "host or CNI interface"}}},
		{"the local cluster's CNI bridge cnibr0", spec("cnibr0", "192.168.71.0/24"), []refusal{{"spec.bridge", `bridge cnibr0 does not start with the bridge prefix "berth"`}}},
		{"bridge outside the prefix", spec("tenantbr", "192.168.71.0/24"), []refusal{{"spec.bridge", `does not start with the bridge prefix "berth"`}}},
		{"the configured pod CIDR", spec("berth-p1", "10.244.8.0/24"), []refusal{{"spec.cidr", "overlaps the cluster's network 10.244.0.0/16"}}},
		{"the service range, discovered from its ServiceCIDR", spec("berth-p1", "10.96.0.0/24"), []refusal{{"spec.cidr", "overlaps the service range (ServiceCIDR kubernetes) 10.96.0.0/16"}}},
		{"node n2's podCIDR, discovered", spec("berth-p1", "10.250.2.0/25"), []refusal{{"spec.cidr", "overlaps the pod range of node n2 " + n2PodCIDR}}},
		{"a configured node network", spec("berth-p1", "172.30.5.0/24"), []refusal{{"spec.cidr", "overlaps the node network " + nodeNetworks}}},
		{"a route into the service range", spec("berth-p1", "192.168.71.0/24", func(s *berthv1alpha1.PodNetworkSpec) {
			s.Routes = []berthv1alpha1.Route{{Destination: "10.96.0.0/12"}}
		}), []refusal{{"spec.routes[0].destination", "the pod's own network carries it"}}},
		{"VLAN parent not allowed", spec("berth-p1", "192.168.71.0/24", func(s *berthv1alpha1.PodNetworkSpec) {
			s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 8, Parent: "eth0"}
		}), []refusal{{"spec.vlan.parent", "eth0 is not in the allowed parents"}}},
		{"the older network's bridge", spec("berth-p0", "192.168.72.0/24"), []refusal{{"spec.bridge", "bridge berth-p0 belongs to PodNetwork owner (older)"}}},
		{"the older network's range", spec("berth-p2", "192.168.70.128/25"), []refusal{{"spec.cidr", "192.168.70.128/25 overlaps 192.168.70.0/24 of PodNetwork owner (older)"}}},
		{"the older network's VLAN", spec("berth-p3", "192.168.73.0/24", func(s *berthv1alpha1.PodNetworkSpec) {
			s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 7, Parent: vlanParent}
		}), []refusal{{"spec.vlan", "VLAN 7 of " + vlanParent + " belongs to PodNetwork owner (older)"}}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("hostile-%d", i)
			pn := &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: tc.spec}
			if err := e.cl.Create(e.ctx, pn); err != nil {
				t.Fatalf("the API server should accept it (the operator's policy refuses it): %v", err)
			}
			e.cleanupNetwork(t, name)
			c := e.waitRefused(t, name, tc.want...)
			if i == 0 {
				// why once: every refusal goes through the same event path.
				e.waitEvent(t, metav1.NamespaceDefault, name, "NetworkRefused", c.Message)
			}
		})
	}
	// The older network kept everything it claimed.
	e.waitAccepted(t, "owner")
}

func (e *env) testRefusedClaimsNothing(t *testing.T) {
	// An older network refused (its range is the cluster's) names a bridge; a newer valid
	// network with that bridge is accepted: the refused one squats nothing.
	squat := framework.NewPodNetwork("squat", "berth-sq", "10.244.9.0/24", "", team("a"))
	if err := e.cl.Create(e.ctx, squat); err != nil {
		t.Fatal(err)
	}
	e.cleanupNetwork(t, "squat")
	e.waitRefused(t, "squat", refusal{"spec.cidr", "overlaps the cluster's network 10.244.0.0/16"})
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "squat"}, squat); err != nil {
		t.Fatal(err)
	}
	afterCreationSecond(squat)
	e.network(t, framework.NewPodNetwork("late", "berth-sq", "192.168.74.0/24", "", team("a")))
	// And the squatter is still refused for its own reason only, not for the bridge.
	c := e.waitRefused(t, "squat", refusal{"spec.cidr", "10.244.0.0/16"})
	if strings.Contains(c.Message, "spec.bridge") {
		t.Errorf("the older, refused network is now refused for the bridge: %s", c.Message)
	}
}

func (e *env) testBind(t *testing.T) {
	e.network(t, framework.NewPodNetwork("granted-a", "berth-ga", "192.168.77.0/24", "192.168.77.1", team("a")))
	e.network(t, framework.NewPodNetwork("only-b", "berth-ob", "192.168.75.0/24", "192.168.75.1", team("b")))
	refused := framework.NewPodNetwork("refused", "tenantbr1", "192.168.76.0/24", "", nil)
	if err := e.cl.Create(e.ctx, refused); err != nil {
		t.Fatal(err)
	}
	e.cleanupNetwork(t, "refused")
	e.waitRefused(t, "refused", refusal{"spec.bridge", "prefix"})
	cases := []struct {
		name      string
		atts      []berthv1alpha1.NetworkAttachment
		wantField string
		wantMsg   string
	}{
		{"a network that does not exist", []berthv1alpha1.NetworkAttachment{att("net1", "nosuch")},
			"spec.networkAttachments[0].network", "no PodNetwork of that name"},
		{"a network the operator refused", []berthv1alpha1.NetworkAttachment{att("net1", "refused")},
			"spec.networkAttachments[0].network", "the PodNetwork is not accepted"},
		{"a network that does not grant the namespace", []berthv1alpha1.NetworkAttachment{att("net1", "only-b")},
			"spec.networkAttachments[0].network", "PodNetwork only-b does not grant namespace tenant-a"},
		{"one granted network and one not: nothing at all", []berthv1alpha1.NetworkAttachment{att("net1", "granted-a"), att("net2", "only-b")},
			"spec.networkAttachments[1].network", "PodNetwork only-b does not grant namespace tenant-a"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("bind-%d", i)
			e.createPC(t, pcObj(nsA, name, tc.atts...))
			// Two pods it selects, one per node: nothing may be allocated for them.
			e.createPods(t, nsA, name, 2, map[string]string{berthv1alpha1.PodConfigLabel: name})
			pc := e.degradedSpec(t, nsA, name, "Degraded naming "+tc.wantField, nil)
			c := condition(pc, berthv1alpha1.ConditionDegraded)
			if !strings.Contains(c.Message, tc.wantField) || !strings.Contains(c.Message, tc.wantMsg) {
				t.Fatalf("Degraded %q; want it to name %s (%q)", c.Message, tc.wantField, tc.wantMsg)
			}
			if len(pc.Status.Pods) != 0 || pc.Status.PodCount != 0 {
				t.Fatalf("refused PodConfig has pods or entries: %d, %+v", pc.Status.PodCount, pc.Status.Pods)
			}
			for _, a := range tc.atts {
				if n := e.heldBy(t, a.Network, nsA, name); n != 0 {
					t.Fatalf("refused PodConfig holds %d addresses of %s: %v", n, a.Network, e.pool(t, a.Network))
				}
			}
		})
	}
	// The control: the same attachment from the namespace the network grants is allocated.
	t.Run("the same network from the namespace it grants", func(t *testing.T) {
		e.createPC(t, pcObj(nsB, "bind-b", att("net1", "only-b")))
		e.createPods(t, nsB, "bind-b", 1, map[string]string{berthv1alpha1.PodConfigLabel: "bind-b"})
		pc := e.waitPC(t, nsB, "bind-b", "one Allocated entry", func(pc *berthv1alpha1.PodConfig) bool {
			return countState(pc, berthv1alpha1.AttachmentAllocated) == 1
		})
		if en := pc.Status.Pods[0]; en.Network != "only-b" || en.Bridge != "berth-ob" || !strings.HasPrefix(en.Address, "192.168.75.") {
			t.Fatalf("entry %+v, want network only-b on berth-ob with an address of 192.168.75.0/24", en)
		}
	})
}

func (e *env) testNamespaced(t *testing.T) {
	// A network both namespaces may use: only the PodConfig's own namespace decides its pods.
	shared := framework.NewPodNetwork("shared", "berth-x0", "192.168.80.0/24", "", nil)
	shared.Spec.NamespaceSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: teamLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	e.network(t, shared)
	// The API has no way to name another namespace: an attempt is refused as an unknown field.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "berth.dev/v1alpha1", "kind": "PodConfig",
		"metadata": map[string]any{"name": "cross", "namespace": nsB},
		"spec": map[string]any{
			"namespaceSelector":  map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": nsA}},
			"networkAttachments": []any{map[string]any{"name": "net1", "network": "shared"}},
		},
	}}
	gvr := berthv1alpha1.GroupVersion.WithResource("podconfigs")
	_, err := e.dyn.Resource(gvr).Namespace(nsB).Create(e.ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
	if err == nil || !strings.Contains(err.Error(), "namespaceSelector") {
		t.Fatalf("want namespaceSelector refused as unknown, got %v", err)
	}
	// A selector matching pods of tenant-a, from tenant-b: selects nothing.
	e.createPods(t, nsA, "victim", 1, map[string]string{"app": "victim"})
	pc := pcObj(nsB, "cross", att("net1", "shared"))
	pc.Spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "victim"}}
	e.createPC(t, pc)
	got := e.waitPC(t, nsB, "cross", "reconciled", func(pc *berthv1alpha1.PodConfig) bool {
		return pc.Status.ObservedGeneration == pc.Generation && pc.Status.Phase != ""
	})
	if got.Status.PodCount != 0 || len(got.Status.Pods) != 0 || got.Status.Phase != berthv1alpha1.PodConfigPending {
		t.Fatalf("tenant-b's PodConfig reached tenant-a's pod: %+v", got.Status)
	}
	if allocs := e.pool(t, "shared"); len(allocs) != 0 {
		t.Fatalf("addresses allocated across namespaces: %v", allocs)
	}
}

const (
	webNet  = "web"
	webCIDR = "192.168.50.0/29" // gateway .1: five addresses (.2-.6) for pods
)

func (e *env) testAllocations(t *testing.T) {
	// why e.t: the network, the PodConfig and its pods carry on into the restart test.
	e.network(e.t, framework.NewPodNetwork(webNet, "berth-web", webCIDR, "192.168.50.1", team("a")))
	e.createPC(e.t, pcObj(nsA, "web", att("net1", webNet)))
	web := map[string]string{berthv1alpha1.PodConfigLabel: "web"}
	pods := e.createPods(e.t, nsA, "web", 3, web)
	allocs := e.waitPool(t, webNet, "3 addresses", func(m map[string]berthv1alpha1.Allocation) bool { return len(m) == 3 })
	for addr, a := range allocs {
		if addr == "192.168.50.0" || addr == "192.168.50.1" || addr == "192.168.50.7" {
			t.Fatalf("reserved address %s allocated to %s", addr, a.PodName)
		}
	}
	got := e.waitPC(t, nsA, "web", "3 Allocated entries", func(pc *berthv1alpha1.PodConfig) bool {
		return countState(pc, berthv1alpha1.AttachmentAllocated) == 3 && pc.Status.PodCount == 3
	})
	for _, p := range got.Status.Pods {
		a, ok := allocs[strings.TrimSuffix(p.Address, "/29")]
		if !ok || a.PodUID != p.PodUID || a.Attachment != "net1" || a.Node != p.Node || !strings.HasSuffix(p.Address, "/29") ||
			p.Network != webNet || p.Bridge != "berth-web" {
			t.Fatalf("status entry %+v does not match IPAllocation %v", p, allocs)
		}
	}
	if got.Status.Phase != berthv1alpha1.PodConfigConfiguring {
		t.Fatalf("phase %s, want Configuring (no agent has reported)", got.Status.Phase)
	}

	// Three more: five addresses for six pods.
	e.createPods(e.t, nsA, "web-more", 3, web)
	var failed string
	e.waitPC(t, nsA, "web", "one entry Failed exhausted", func(pc *berthv1alpha1.PodConfig) bool {
		for _, p := range pc.Status.Pods {
			if p.State == berthv1alpha1.AttachmentFailed && strings.Contains(p.LastError, "network web (192.168.50.0/29 on berth-web) exhausted") {
				failed = p.Pod
			}
		}
		return failed != "" && pc.Status.Phase == berthv1alpha1.PodConfigFailed
	})
	if m := e.pool(t, webNet); len(m) != 5 {
		t.Fatalf("want the pool full (5), got %v", m)
	}
	e.waitEvent(t, nsA, "web", "NetworkExhausted", "")
	e.waitNetworkUsed(t, webNet, 5)

	// Freeing one address (its pod deleted) gives it to the failed pod.
	victim := pods[0]
	if victim.Name == failed {
		victim = pods[1]
	}
	e.deletePod(t, victim)
	e.waitPC(t, nsA, "web", "the failed pod allocated after a pod was deleted", func(pc *berthv1alpha1.PodConfig) bool {
		for _, p := range pc.Status.Pods {
			if p.Pod == victim.Name {
				return false
			}
		}
		return countState(pc, berthv1alpha1.AttachmentAllocated) == 5
	})
	e.waitPool(t, webNet, "5 addresses, none for the deleted pod", func(m map[string]berthv1alpha1.Allocation) bool {
		for _, a := range m {
			if a.PodUID == string(victim.UID) {
				return false
			}
		}
		return len(m) == 5
	})
}

// waitNetworkUsed waits until the PodNetwork's status counts used addresses.
func (e *env) waitNetworkUsed(t *testing.T, name string, used int64) {
	t.Helper()
	pn := &berthv1alpha1.PodNetwork{}
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return e.cl.Get(ctx, client.ObjectKey{Name: name}, pn) == nil && pn.Status.Used == used, nil
	})
	if err != nil {
		t.Fatalf("PodNetwork %s status.used %d, want %d", name, pn.Status.Used, used)
	}
}

// waitEvent waits for an event of reason about ns/name whose note contains note.
func (e *env) waitEvent(t *testing.T, ns, name, reason, note string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := e.c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, ev := range list.Items {
			if ev.Regarding.Name == name && ev.Reason == reason && strings.Contains(ev.Note, note) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event for %s/%s saying %q", reason, ns, name, note)
	}
}

func (e *env) testRestart(t *testing.T, op *cluster.Process) {
	before := e.pool(t, webNet)
	if len(before) != 5 {
		t.Fatalf("want the web pool full before the restart, got %v", before)
	}
	// Kill (no graceful shutdown), free an address while no operator runs, then start a new one.
	_ = syscall.Kill(op.PID(), syscall.SIGKILL)
	op.Stop(time.Second)
	var list corev1.PodList
	if err := e.cl.List(e.ctx, &list, client.InNamespace(nsA), client.MatchingLabels{berthv1alpha1.PodConfigLabel: "web"}); err != nil {
		t.Fatal(err)
	}
	gone := &list.Items[0]
	e.deletePod(t, gone)
	newPods := e.createPods(e.t, nsA, "web-late", 1, map[string]string{berthv1alpha1.PodConfigLabel: "web"})
	e.startOperator("berth-operator-2")
	after := e.waitPool(t, webNet, "the deleted pod's address freed and reused by the new pod", func(m map[string]berthv1alpha1.Allocation) bool {
		for _, a := range m {
			if a.PodUID == string(newPods[0].UID) {
				return len(m) == 5
			}
		}
		return false
	})
	for addr, a := range before {
		if a.PodUID == string(gone.UID) {
			continue
		}
		if b, ok := after[addr]; !ok || b.PodUID != a.PodUID {
			t.Fatalf("address %s of live pod %s changed hands across the restart: before %v after %v", addr, a.PodName, before, after)
		}
	}
}

const (
	raceNet  = "race"
	racePods = 24
)

func (e *env) testRace(t *testing.T) {
	e.startOperator("berth-operator-3")
	// why e.t: the PodConfig and its pods carry on into the agents-and-deletion test.
	e.network(e.t, framework.NewPodNetwork(raceNet, "berth-race", "192.168.90.0/26", "192.168.90.1", team("b")))
	if err := e.cl.Create(e.ctx, pcObj(nsB, "race", att("net1", raceNet))); err != nil {
		t.Fatal(err)
	}
	// Watch the pool while both operators allocate: an address must never change owner.
	owners := map[string]string{}
	var mu sync.Mutex
	var violation string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			obj := &berthv1alpha1.IPAllocation{}
			if err := e.cl.Get(e.ctx, client.ObjectKey{Name: raceNet}, obj); err != nil {
				continue
			}
			mu.Lock()
			perPod := map[string]string{}
			for _, a := range obj.Spec.Allocations {
				if prev, ok := owners[a.Address]; ok && prev != a.PodUID && violation == "" {
					violation = fmt.Sprintf("address %s owned by %s, then by %s", a.Address, prev, a.PodUID)
				}
				owners[a.Address] = a.PodUID
				if other, ok := perPod[a.PodUID+"/"+a.Attachment]; ok && violation == "" {
					violation = fmt.Sprintf("pod %s holds %s and %s", a.PodUID, other, a.Address)
				}
				perPod[a.PodUID+"/"+a.Attachment] = a.Address
			}
			mu.Unlock()
		}
	}()
	e.createPods(e.t, nsB, "race", racePods, map[string]string{berthv1alpha1.PodConfigLabel: "race"})
	final := e.waitPool(t, raceNet, fmt.Sprintf("%d addresses", racePods), func(m map[string]berthv1alpha1.Allocation) bool { return len(m) == racePods })
	got := e.waitPC(t, nsB, "race", "every pod Allocated", func(pc *berthv1alpha1.PodConfig) bool {
		return countState(pc, berthv1alpha1.AttachmentAllocated) == racePods
	})
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if violation != "" {
		t.Fatal(violation)
	}
	uids := map[string]bool{}
	for _, a := range final {
		uids[a.PodUID] = true
	}
	if len(uids) != racePods {
		t.Fatalf("%d pods hold the %d addresses, want one each", len(uids), len(final))
	}
	for _, p := range got.Status.Pods {
		if a, ok := final[strings.TrimSuffix(p.Address, "/26")]; !ok || a.PodUID != p.PodUID {
			t.Fatalf("status entry %+v disagrees with the IPAllocation", p)
		}
	}
}

// applyAgent server-side-applies the entries of node as that node's agent does, in state.
func (e *env) applyAgent(t *testing.T, ns, name, node string, entries []berthv1alpha1.PodAttachmentStatus, state berthv1alpha1.AttachmentState) {
	t.Helper()
	var list []any
	for _, p := range entries {
		if p.Node != node {
			continue
		}
		list = append(list, map[string]any{
			"pod": p.Pod, "attachment": p.Attachment, "podUID": p.PodUID, "node": node, "interface": p.Attachment,
			"network": p.Network, "address": p.Address, "bridge": p.Bridge, "hostPeer": podconfig.HostPeerName(p.PodUID, p.Attachment),
			"state": string(state), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "berth.dev/v1alpha1", "kind": "PodConfig",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"status":   map[string]any{"pods": list},
	}}
	gvr := berthv1alpha1.GroupVersion.WithResource("podconfigs")
	_, err := e.dyn.Resource(gvr).Namespace(ns).ApplyStatus(e.ctx, name, u, metav1.ApplyOptions{FieldManager: berthv1alpha1.PodConfigAgentFieldManagerPrefix + node, Force: true})
	if err != nil {
		t.Fatalf("agent of %s applying status: %v", node, err)
	}
}

// configureAll reports every entry Configured as the agents of n1 and n2 would, and waits
// until the operator says the PodConfig is Configured with count pods.
func (e *env) configureAll(t *testing.T, ns, name string, count int) *berthv1alpha1.PodConfig {
	t.Helper()
	pc := e.waitPC(t, ns, name, fmt.Sprintf("%d Allocated entries", count), func(pc *berthv1alpha1.PodConfig) bool {
		return countState(pc, berthv1alpha1.AttachmentAllocated) == count
	})
	for _, node := range []string{"n1", "n2"} {
		e.applyAgent(t, ns, name, node, pc.Status.Pods, berthv1alpha1.AttachmentConfigured)
	}
	return e.waitPC(t, ns, name, "Configured and Ready", func(pc *berthv1alpha1.PodConfig) bool {
		c := condition(pc, berthv1alpha1.ConditionReady)
		return pc.Status.Phase == berthv1alpha1.PodConfigConfigured && c != nil && c.Status == metav1.ConditionTrue && int(pc.Status.ConfiguredCount) == count
	})
}

func allRemoving(n int) func(*berthv1alpha1.PodConfig) bool {
	return func(pc *berthv1alpha1.PodConfig) bool {
		return len(pc.Status.Pods) == n && countState(pc, berthv1alpha1.AttachmentRemoving) == n
	}
}

// onNode is the pool's addresses on node.
func onNode(m map[string]berthv1alpha1.Allocation, node string) int {
	n := 0
	for _, a := range m {
		if a.Node == node {
			n++
		}
	}
	return n
}

func (e *env) testAgentsAndDeletion(t *testing.T) {
	// Each node's agent reports its own entries Configured; the operator keeps them and
	// reaches Configured / Ready.
	pc := e.configureAll(t, nsB, "race", racePods)
	for _, p := range pc.Status.Pods {
		if p.HostPeer == "" || p.State != berthv1alpha1.AttachmentConfigured {
			t.Fatalf("agent's fields lost: %+v", p)
		}
	}
	// Deleting the PodConfig: the finalizer holds it, every entry goes Removing and the
	// addresses stay allocated until the agents report Removed.
	if err := e.cl.Delete(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
	pc = e.waitPC(t, nsB, "race", "every entry Removing", allRemoving(racePods))
	if m := e.pool(t, raceNet); len(m) != racePods {
		t.Fatalf("addresses freed before the agents confirmed removal: %d left", len(m))
	}
	// n1 reports first: only its addresses are freed.
	e.applyAgent(t, nsB, "race", "n1", pc.Status.Pods, berthv1alpha1.AttachmentRemoved)
	e.waitPool(t, raceNet, "n1's 12 addresses freed", func(m map[string]berthv1alpha1.Allocation) bool {
		return onNode(m, "n1") == 0 && len(m) == racePods/2
	})
	if err := e.cl.Get(e.ctx, client.ObjectKeyFromObject(pc), &berthv1alpha1.PodConfig{}); err != nil {
		t.Fatalf("PodConfig gone while n2 has not reported: %v", err)
	}
	e.applyAgent(t, nsB, "race", "n2", pc.Status.Pods, berthv1alpha1.AttachmentRemoved)
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(pc), &berthv1alpha1.PodConfig{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("PodConfig not deleted after every agent reported removal: %v", err)
	}
	// The pool lives as long as its network: empty, not deleted, and the network says so.
	if m := e.pool(t, raceNet); m == nil || len(m) != 0 {
		t.Fatalf("pool of the still existing network %s: %v, want present and empty", raceNet, m)
	}
	e.waitNetworkUsed(t, raceNet, 0)
}

func (e *env) testRevokeGrant(t *testing.T) {
	const grantKey, grantValue, net = "berth-e2e-grant", "revocable", "revocable"
	relabel := func(value *string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, grantKey)
		if value != nil {
			patch = fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, grantKey, *value)
		}
		if err := e.cl.Patch(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsA}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	granted := grantValue
	relabel(&granted)
	t.Cleanup(func() { relabel(nil) })
	e.network(t, framework.NewPodNetwork(net, "berth-rv", "192.168.91.0/28", "192.168.91.1", map[string]string{grantKey: grantValue}))
	e.createPC(t, pcObj(nsA, "rv", att("net1", net)))
	e.createPods(t, nsA, "rv", 2, map[string]string{berthv1alpha1.PodConfigLabel: "rv"}) // rv-0 on n1, rv-1 on n2
	e.configureAll(t, nsA, "rv", 2)

	// The administrator's grant goes (the namespace no longer carries the label).
	relabel(nil)
	pc := e.degradedSpec(t, nsA, "rv", "Degraded naming the network, every entry Removing", allRemoving(2))
	c := condition(pc, berthv1alpha1.ConditionDegraded)
	if want := "spec.networkAttachments[0].network: Forbidden: PodNetwork revocable does not grant namespace tenant-a"; !strings.Contains(c.Message, want) {
		t.Fatalf("Degraded %q, want %q", c.Message, want)
	}
	if m := e.pool(t, net); len(m) != 2 {
		t.Fatalf("addresses freed before the agents confirmed removal: %v", m)
	}
	e.applyAgent(t, nsA, "rv", "n1", pc.Status.Pods, berthv1alpha1.AttachmentRemoved)
	e.waitPool(t, net, "n1's address freed, n2's kept", func(m map[string]berthv1alpha1.Allocation) bool {
		return onNode(m, "n1") == 0 && onNode(m, "n2") == 1
	})
	e.applyAgent(t, nsA, "rv", "n2", pc.Status.Pods, berthv1alpha1.AttachmentRemoved)
	e.waitPool(t, net, "every address freed", func(m map[string]berthv1alpha1.Allocation) bool { return len(m) == 0 })
	e.waitPC(t, nsA, "rv", "no entry left, still refused", func(pc *berthv1alpha1.PodConfig) bool {
		d := condition(pc, berthv1alpha1.ConditionDegraded)
		return len(pc.Status.Pods) == 0 && d != nil && d.Status == metav1.ConditionTrue
	})

	// Granted again: the same PodConfig binds and allocates again, with nothing changed on it.
	relabel(&granted)
	e.waitPC(t, nsA, "rv", "bound again, two Allocated entries", func(pc *berthv1alpha1.PodConfig) bool {
		d := condition(pc, berthv1alpha1.ConditionDegraded)
		return d != nil && d.Status == metav1.ConditionFalse && countState(pc, berthv1alpha1.AttachmentAllocated) == 2
	})
}

func (e *env) testDeleteNetwork(t *testing.T) {
	const net = "doomed"
	e.network(t, framework.NewPodNetwork(net, "berth-dm", "192.168.92.0/28", "192.168.92.1", team("a")))
	e.createPC(t, pcObj(nsA, "dm", att("net1", net)))
	e.createPods(t, nsA, "dm", 2, map[string]string{berthv1alpha1.PodConfigLabel: "dm"})
	e.configureAll(t, nsA, "dm", 2)

	if err := e.cl.Delete(e.ctx, &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: net}}); err != nil {
		t.Fatal(err)
	}
	// The network stays (its finalizer) and says why; the PodConfig's entries go Removing.
	pn := &berthv1alpha1.PodNetwork{}
	var ready *metav1.Condition
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := e.cl.Get(ctx, client.ObjectKey{Name: net}, pn); err != nil {
			return false, nil
		}
		ready = meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionReady)
		return ready != nil && ready.Reason == "Deleting", nil
	})
	if err != nil {
		t.Fatalf("deleted PodNetwork not held with Ready reason Deleting: %v; %+v", err, pn.Status)
	}
	if pn.DeletionTimestamp.IsZero() || len(pn.Finalizers) != 1 || pn.Finalizers[0] != berthv1alpha1.PodNetworkFinalizer ||
		!strings.Contains(ready.Message, "waiting for 2 attachments") {
		t.Fatalf("PodNetwork %s: deletion %v, finalizers %v, Ready %q; want held by %s waiting for 2 attachments",
			net, pn.DeletionTimestamp, pn.Finalizers, ready.Message, berthv1alpha1.PodNetworkFinalizer)
	}
	pc := e.degradedSpec(t, nsA, "dm", "Degraded naming the network being deleted, every entry Removing", allRemoving(2))
	if c := condition(pc, berthv1alpha1.ConditionDegraded); !strings.Contains(c.Message, "spec.networkAttachments[0].network") || !strings.Contains(c.Message, "being deleted") {
		t.Fatalf("Degraded %q, want it to name spec.networkAttachments[0].network being deleted", c.Message)
	}
	// Meanwhile no PodConfig binds it, and no newer network takes its bridge.
	e.createPC(t, pcObj(nsA, "dm-late", att("net1", net)))
	e.createPods(t, nsA, "dm-late", 1, map[string]string{berthv1alpha1.PodConfigLabel: "dm-late"})
	e.degradedSpec(t, nsA, "dm-late", "refused: the network is being deleted", func(pc *berthv1alpha1.PodConfig) bool {
		return strings.Contains(condition(pc, berthv1alpha1.ConditionDegraded).Message, "being deleted")
	})
	afterCreationSecond(pn)
	successor := framework.NewPodNetwork("successor", "berth-dm", "192.168.93.0/28", "", team("a"))
	if err := e.cl.Create(e.ctx, successor); err != nil {
		t.Fatal(err)
	}
	e.cleanupNetwork(t, successor.Name)
	e.waitRefused(t, successor.Name, refusal{"spec.bridge", "bridge berth-dm belongs to PodNetwork doomed (older)"})
	if m := e.pool(t, net); len(m) != 2 || e.heldBy(t, net, nsA, "dm-late") != 0 {
		t.Fatalf("pool of the deleted network before the agents confirmed: %v, want dm's 2 addresses", m)
	}

	// One node confirms: the network still waits for the other.
	e.applyAgent(t, nsA, "dm", "n1", pc.Status.Pods, berthv1alpha1.AttachmentRemoved)
	e.waitPool(t, net, "n1's address freed", func(m map[string]berthv1alpha1.Allocation) bool { return len(m) == 1 && onNode(m, "n2") == 1 })
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: net}, pn); err != nil {
		t.Fatalf("PodNetwork gone while an address of it is allocated: %v", err)
	}
	// The other confirms: the pool, then the network go.
	e.applyAgent(t, nsA, "dm", "n2", pc.Status.Pods, berthv1alpha1.AttachmentRemoved)
	err = wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(e.cl.Get(ctx, client.ObjectKey{Name: net}, &berthv1alpha1.PodNetwork{})) &&
			apierrors.IsNotFound(e.cl.Get(ctx, client.ObjectKey{Name: net}, &berthv1alpha1.IPAllocation{})), nil
	})
	if err != nil {
		t.Fatalf("PodNetwork %s or its IPAllocation not gone after every attachment was removed: %v", net, err)
	}
	e.degradedSpec(t, nsA, "dm", "refused: the network no longer exists", func(pc *berthv1alpha1.PodConfig) bool {
		return len(pc.Status.Pods) == 0 && strings.Contains(condition(pc, berthv1alpha1.ConditionDegraded).Message, "no PodNetwork of that name")
	})
	// The bridge is free again: the newer network that wanted it is accepted now.
	e.waitAccepted(t, successor.Name)
}
