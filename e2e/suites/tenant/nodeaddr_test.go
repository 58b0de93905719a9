package tenant

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// The second node of the node-address cluster, and its address (10.244.1.1 on its pod
// bridge): what issue 35's attacker put on a bridge of the first node.
const (
	otherNode = "berth-real-2"
	otherIP   = "10.244.1.1"
)

// TestNetworksNeverTakeANodesAddress is issue 35's third door on the README's own cluster as it
// was found: two real nodes without spec.podCIDR, and the operator without cluster CIDRs
// (the chart's default podConfig.clusterCIDRs: []). First every network is refused, naming
// podConfig.clusterCIDRs; then, with the administrator's statement that names only the service
// range (the pod range still unknown), every network that holds a node's address as its range,
// gateway, route destination or via is refused naming the node, the address and the field,
// while a clear network works and, once released, says so. The first node's links, addresses
// and routes are unchanged after.
func TestNetworksNeverTakeANodesAddress(t *testing.T) {
	framework.NeedRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img, err := framework.NetechoImage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Config{
		RealNode:    &cluster.RealNodeConfig{NodeName: realNode, Count: 2, Images: []string{img}},
		WithoutKWOK: true, WithoutPodCIDRs: true, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if err := framework.InstallPodConfigCRDs(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	e := &env{ctx: ctx, c: c, rn: c.RealNode()}
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = rbacv1.AddToScheme(s)
	_ = berthv1alpha1.AddToScheme(s)
	if e.admin, err = client.New(c.RESTConfig, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	// The precondition of the attack: no node has a pod range to discover, and the second
	// node's address is what the attacker aims at.
	var nodes corev1.NodeList
	if err := e.admin.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Spec.PodCIDR != "" || len(n.Spec.PodCIDRs) > 0 {
			t.Fatalf("node %s has podCIDR %q: the cluster must have none", n.Name, n.Spec.PodCIDRs)
		}
	}
	if got := nodeIPs(t, e, otherNode); !strings.Contains(got, otherIP) {
		t.Fatalf("node %s reports %s, want %s among its addresses", otherNode, got, otherIP)
	}
	agentRole := e.applyChartRBAC(t)
	for ns, team := range map[string]string{attacker: "red", victim: "blue"} {
		if err := e.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": team}}}); err != nil {
			t.Fatal(err)
		}
	}
	e.tenant, e.tdyn = e.tenantClients(t, s)
	// The agent runs with the chart's ClusterRole: its node informer syncs (it is not ready
	// otherwise) only because the chart grants list/watch on nodes.
	if err := framework.PodConfigAgentRBAC(ctx, c, agentRole); err != nil {
		t.Fatal(err)
	}
	op, err := framework.StartPodConfigOperator(ctx, c, "berth-operator", "--podconfig-cluster-cidrs=")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := framework.StartPodConfigAgent(ctx, c, "berth-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log tail:\n%s", agent.Tail(60))
			t.Logf("operator log tail:\n%s", op.Tail(40))
		}
	})
	p := framework.NetechoPod(attacker, "app", realNode, map[string]string{berthv1alpha1.PodConfigLabel: "net"})
	if err := e.admin.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.WaitPods(ctx, c.Client, attacker, berthv1alpha1.PodConfigLabel+"=net", 1, time.Minute, framework.Running); err != nil {
		t.Fatal(err)
	}
	before := e.unmarkedState(t)

	// A network clear of everything the operator can see, granted to the attacker's namespace.
	e.createNetwork(t, "clear", "berth-clear", "192.168.91.0/24", "192.168.91.1", map[string]string{"team": "red"}, nil)
	pc := podConfig(attacker, "net", berthv1alpha1.NetworkAttachment{Name: "net1", Network: "clear"})

	t.Run("no pod range known: every network refused, naming podConfig.clusterCIDRs", func(t *testing.T) {
		e.waitAccepted(t, "clear", false, "spec.cidr: Forbidden: the cluster's pod range is unknown")
		e.waitAccepted(t, "clear", false, "set podConfig.clusterCIDRs")
		if r := acceptedReason(t, e, "clear"); r != "PodRangeUnknown" {
			t.Errorf("Accepted reason %q, want PodRangeUnknown", r)
		}
		if err := e.tenant.Create(e.ctx, pc); err != nil {
			t.Fatal(err)
		}
		e.waitPodConfig(t, attacker, "net", degradedWith("spec.networkAttachments[0].network", "not accepted", "podConfig.clusterCIDRs"))
	})

	// The administrator states the cluster's ranges, here the service range alone: the pod
	// range stays unknown, so only the nodes' own addresses stand between a network and them.
	op.Stop(5 * time.Second)
	op, err = framework.StartPodConfigOperator(ctx, c, "berth-operator-2", "--podconfig-cluster-cidrs="+cluster.ServiceCIDR)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("with cluster CIDRs set, the clear network is accepted and the tenant's pod attached", func(t *testing.T) {
		e.waitAccepted(t, "clear", true, "")
		got := e.waitPodConfig(t, attacker, "net", func(pc *berthv1alpha1.PodConfig) bool {
			return pc.Status.Phase == berthv1alpha1.PodConfigConfigured && len(pc.Status.Pods) == 1
		})
		if a := got.Status.Pods[0].Address; !strings.HasPrefix(a, "192.168.91.") {
			t.Errorf("address %s, want one of 192.168.91.0/24", a)
		}
		e.waitReady(t, "clear", "AddressesInUse", "1 addresses in use")
	})

	t.Run("a network holding a node's address is refused naming the node, the address and the field", func(t *testing.T) {
		i := 0
		for _, tc := range []struct {
			name, cidr, gw string
			routes         []berthv1alpha1.Route
			want           []string
		}{
			{"a range holding another node's address", "10.244.1.0/24", "", nil,
				[]string{"spec.cidr: Forbidden: 10.244.1.0/24 overlaps node " + otherNode + "'s InternalIP " + otherIP + "/32"}},
			{"another node's address as gateway (issue 35)", "10.244.1.0/24", otherIP, nil,
				[]string{"spec.gateway: Forbidden: " + otherIP + " is node " + otherNode + "'s InternalIP"}},
			{"this node's own address as gateway", "10.244.0.0/24", cluster.RealNodeIP, nil,
				[]string{"spec.gateway: Forbidden: " + cluster.RealNodeIP + " is node " + realNode + "'s InternalIP"}},
			{"a route to another node", "192.168.92.0/24", "", []berthv1alpha1.Route{{Destination: otherIP + "/32"}},
				[]string{"spec.routes[0].destination: Forbidden: " + otherIP + "/32 overlaps node " + otherNode + "'s InternalIP"}},
			{"a route via another node's address", "10.244.1.0/25", "10.244.1.2", []berthv1alpha1.Route{{Destination: "172.30.0.0/16", Via: otherIP}},
				[]string{"spec.routes[0].via: Forbidden: " + otherIP + " is node " + otherNode + "'s InternalIP"}},
		} {
			i++
			name := fmt.Sprintf("node-addr-%d", i)
			t.Run(tc.name, func(t *testing.T) {
				e.createNetwork(t, name, "berth-na", tc.cidr, tc.gw, map[string]string{"team": "red"}, tc.routes)
				for _, w := range tc.want {
					e.waitAccepted(t, name, false, w)
				}
				// The attacker's namespace is granted it, and gets nothing from it.
				pc := podConfig(attacker, "na", berthv1alpha1.NetworkAttachment{Name: "net2", Network: name})
				if err := e.tenant.Create(e.ctx, pc); err != nil {
					t.Fatal(err)
				}
				defer e.deleteAndWait(t, pc)
				e.waitPodConfig(t, attacker, "na", degradedWith("spec.networkAttachments[0].network", "not accepted", tc.want[0]))
				e.deleteAndWait(t, &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}})
			})
		}
	})

	t.Run("released: the network says 0 addresses in use", func(t *testing.T) {
		e.deleteAndWait(t, pc)
		e.waitReady(t, "clear", "Released", "0 addresses in use")
	})

	// The agent's own check, on the real API server: with the operator gone, an administrator
	// writes around it a network whose gateway is berth-real-2's address, marks it Accepted,
	// and an entry allocated on berth-real. The agent, from its own node informer, refuses it.
	op.Stop(5 * time.Second)
	t.Run("the agent refuses another node's gateway even when the operator is bypassed", func(t *testing.T) {
		e.testAgentRefusesNodeGateway(t, p)
	})

	t.Run("the node: nothing the agent did not create gained an address, route or port", func(t *testing.T) {
		// The other node's address never reached a bridge here: kubelet's port on it still
		// answers through the node link, as the API server's log and exec need.
		if out, err := e.rn.InNetNS(e.ctx, "ip", "-o", "addr", "show"); err != nil || strings.Contains(out, " "+otherIP+"/") {
			t.Errorf("node %s carries %s (err %v):\n%s", realNode, otherIP, err, out)
		}
		if d := diff(before, e.unmarkedState(t)); d != "" {
			t.Fatalf("the node's own links, addresses or routes changed:\n%s", d)
		}
	})
}

func nodeIPs(t *testing.T, e *env, name string) string {
	t.Helper()
	n := &corev1.Node{}
	if err := e.admin.Get(e.ctx, client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range n.Status.Addresses {
		out = append(out, string(a.Type)+"="+a.Address)
	}
	return strings.Join(out, ",")
}

func acceptedReason(t *testing.T, e *env, name string) string {
	t.Helper()
	pn := &berthv1alpha1.PodNetwork{}
	if err := e.admin.Get(e.ctx, client.ObjectKey{Name: name}, pn); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionAccepted); c != nil {
		return c.Reason
	}
	return ""
}

// waitReady waits for the network's Ready condition to be True with reason and a message
// starting with msg.
func (e *env) waitReady(t *testing.T, name, reason, msg string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pn := &berthv1alpha1.PodNetwork{}
		if err := e.admin.Get(ctx, client.ObjectKey{Name: name}, pn); err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionReady)
		if c == nil {
			return false, nil
		}
		last = string(c.Status) + " " + c.Reason + " " + c.Message
		return c.Status == metav1.ConditionTrue && c.Reason == reason && strings.HasPrefix(c.Message, msg), nil
	})
	if err != nil {
		t.Fatalf("network %s: want Ready True %s %q, got %s", name, reason, msg, last)
	}
}

func (e *env) testAgentRefusesNodeGateway(t *testing.T, pod *corev1.Pod) {
	ctx := e.ctx
	pn := network("sneak", "berth-sneak", "10.244.1.0/24", otherIP, map[string]string{"team": "red"}, nil)
	if err := e.admin.Create(ctx, pn); err != nil {
		t.Fatal(err)
	}
	defer e.deleteAndWait(t, &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "sneak"}})
	meta.SetStatusCondition(&pn.Status.Conditions, metav1.Condition{Type: berthv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: "WrittenAroundTheOperator", Message: "the test's forgery"})
	if err := e.admin.Status().Update(ctx, pn); err != nil {
		t.Fatal(err)
	}
	if err := e.admin.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	pc := podConfig(attacker, "sneak", berthv1alpha1.NetworkAttachment{Name: "net3", Network: "sneak"})
	if err := e.admin.Create(ctx, pc); err != nil {
		t.Fatal(err)
	}
	defer e.deleteAndWait(t, pc)
	pc.Status.Pods = []berthv1alpha1.PodAttachmentStatus{{Pod: pod.Name, Attachment: "net3", PodUID: string(pod.UID), Node: realNode,
		Address: "10.244.1.9/24", State: berthv1alpha1.AttachmentAllocated}}
	if err := e.admin.Status().Update(ctx, pc); err != nil {
		t.Fatal(err)
	}
	want := "spec.gateway: Forbidden: " + otherIP + " is node " + otherNode + "'s InternalIP"
	e.waitPodConfig(t, attacker, "sneak", func(pc *berthv1alpha1.PodConfig) bool {
		return len(pc.Status.Pods) == 1 && pc.Status.Pods[0].State == berthv1alpha1.AttachmentFailed &&
			strings.Contains(pc.Status.Pods[0].LastError, "refused by the node agent") && strings.Contains(pc.Status.Pods[0].LastError, want)
	})
	if out, err := e.rn.InNetNS(ctx, "ip", "-o", "addr", "show"); err != nil || strings.Contains(out, " "+otherIP+"/") {
		t.Errorf("node %s carries %s (err %v):\n%s", realNode, otherIP, err, out)
	}
	if _, err := e.rn.InNetNS(ctx, "ip", "link", "show", "berth-sneak"); err == nil {
		t.Error("the agent made bridge berth-sneak for a refused network")
	}
}
