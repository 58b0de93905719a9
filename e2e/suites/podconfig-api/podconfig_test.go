// Package podconfigapi runs the real berth-operator (--podconfig) against the local cluster's
// real API server with KWOK nodes: the PodConfig and IPAllocation CRDs and their CEL rules,
// hostile PodConfigs refused with the field named (by the API server or in Degraded),
// allocations for scheduled pods persisted in IPAllocations and freed when pods or the
// PodConfig go, per-node status entries server-side-applied the way node agents do, an
// operator killed and replaced without an address re-issued, and two operators (no leader
// election) racing without handing one address out twice.
package podconfigapi

import (
	"context"
	"fmt"
	"net/netip"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-sched/berth/api/crds"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/podconfig"
)

const (
	nsA = "tenant-a"
	nsB = "tenant-b"
	// The harness's pod and service CIDRs (e2e/cluster), given to the operator as the chart does.
	clusterCIDRs = "10.244.0.0/16,10.96.0.0/16"
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
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: "n1"}, cluster.NodeSpec{Name: "n2"}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{nsA, nsB} {
		if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
			t.Fatal(err)
		}
	}
	installCRDs(ctx, t, c)
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = berthv1alpha1.AddToScheme(s)
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, c: c, cl: cl, dyn: dyn}
	op := e.startOperator("berth-operator-1")

	t.Run("API server refuses malformed PodConfigs naming the field", e.testCEL)
	t.Run("operator refuses hostile PodConfigs naming the field and allocates nothing", e.testPolicy)
	t.Run("a PodConfig cannot reach pods of another namespace", e.testNamespaced)
	t.Run("allocations follow pods; exhaustion fails the entry until an address is freed", e.testAllocations)
	t.Run("operator killed and replaced keeps allocations and never re-issues an address", func(t *testing.T) {
		e.testRestart(t, op)
	})
	t.Run("two operators racing never hand out one address twice", e.testRace)
	t.Run("agents' per-node reports and PodConfig deletion through the finalizer", e.testAgentsAndDeletion)
	t.Run("the chart's admission policy limits each agent to its own node's entries", e.testAgentPolicy)
}

func installCRDs(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for _, f := range []string{crds.PodConfigFile, crds.IPAllocationFile} {
		crd, err := crds.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := cluster.InstallCRDs(ctx, c.RESTConfig, crd); err != nil {
			t.Fatal(f, err)
		}
	}
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
			"--podconfig", "--podconfig-cluster-cidrs=" + clusterCIDRs, "--podconfig-allowed-parents=e2evlan0",
			"--zap-log-level=debug"},
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

func att(name, master, cidr, gw string) berthv1alpha1.NetworkAttachment {
	return berthv1alpha1.NetworkAttachment{Name: name, Master: master, CIDR: cidr, Gateway: gw}
}

func (e *env) createPods(t *testing.T, ns, prefix string, n int, labels map[string]string) []*corev1.Pod {
	t.Helper()
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		spec := framework.PodSpec("", "", "")
		spec.NodeName = []string{"n1", "n2"}[i%2]
		p := framework.Pod(ns, fmt.Sprintf("%s-%d", prefix, i), labels, spec)
		if err := e.cl.Create(e.ctx, p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func (e *env) deletePod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if err := e.cl.Delete(e.ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod %s not deleted: %v", p.Name, err)
	}
}

func (e *env) waitPC(t *testing.T, ns, name, what string, ok func(*berthv1alpha1.PodConfig) bool) *berthv1alpha1.PodConfig {
	t.Helper()
	pc := &berthv1alpha1.PodConfig{}
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pc); err != nil {
			return false, nil
		}
		return ok(pc), nil
	})
	if err != nil {
		t.Fatalf("PodConfig %s/%s: %s: %v; last status %+v", ns, name, what, err, pc.Status)
	}
	return pc
}

// allocations returns the IPAllocation of (master, cidr) as address → pod UID (nil if absent).
func (e *env) allocations(t *testing.T, master, cidr string) map[string]berthv1alpha1.Allocation {
	t.Helper()
	obj := &berthv1alpha1.IPAllocation{}
	err := e.cl.Get(e.ctx, client.ObjectKey{Name: podconfig.NetworkName(master, netip.MustParsePrefix(cidr))}, obj)
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

func (e *env) waitAllocations(t *testing.T, master, cidr, what string, ok func(map[string]berthv1alpha1.Allocation) bool) map[string]berthv1alpha1.Allocation {
	t.Helper()
	var last map[string]berthv1alpha1.Allocation
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		last = e.allocations(t, master, cidr)
		return ok(last), nil
	})
	if err != nil {
		t.Fatalf("IPAllocation %s %s: %s: %v; last %v", master, cidr, what, err, last)
	}
	return last
}

func condition(pc *berthv1alpha1.PodConfig, typ string) *metav1.Condition {
	return meta.FindStatusCondition(pc.Status.Conditions, typ)
}

func (e *env) testCEL(t *testing.T) {
	cases := []struct {
		name    string
		a       berthv1alpha1.NetworkAttachment
		wantMsg string
	}{
		{"16-character interface name", att("abcdefghijklmnop", "berth0", "192.168.60.0/24", ""), "spec.networkAttachments[0].name"},
		{"eth0 as interface name", att("eth0", "berth0", "192.168.60.0/24", ""), "eth0 and lo are reserved"},
		{"cidr not a network address", att("net1", "berth0", "192.168.60.7/24", ""), "no host bits"},
		{"cidr malformed", att("net1", "berth0", "192.168.60.0/33", ""), "must be a CIDR"},
		{"gateway outside cidr", att("net1", "berth0", "192.168.60.0/24", "192.168.61.1"), "gateway must be inside cidr"},
		{"gateway is the network address", att("net1", "berth0", "192.168.60.0/24", "192.168.60.0"), "network address"},
		{"vlan without vlanID", berthv1alpha1.NetworkAttachment{Name: "net1", LinkType: berthv1alpha1.LinkVLAN, Master: "berth0", Parent: "e2evlan0", CIDR: "192.168.60.0/24"}, "needs vlanID"},
		{"vlanID on veth", berthv1alpha1.NetworkAttachment{Name: "net1", Master: "berth0", VLANID: ptr.To[int32](7), CIDR: "192.168.60.0/24"}, "only valid with linkType vlan"},
		{"vlanID out of range", berthv1alpha1.NetworkAttachment{Name: "net1", LinkType: berthv1alpha1.LinkVLAN, Master: "berth0", Parent: "e2evlan0", VLANID: ptr.To[int32](4095), CIDR: "192.168.60.0/24"}, "spec.networkAttachments[0].vlanID"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := e.cl.Create(e.ctx, pcObj(nsA, fmt.Sprintf("cel-%d", i), tc.a))
			if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("want Invalid containing %q, got %v", tc.wantMsg, err)
			}
		})
	}
}

func (e *env) testPolicy(t *testing.T) {
	// An accepted, older network on berth-p0; the last case clashes with it.
	good := pcObj(nsB, "owner", att("net1", "berth-p0", "192.168.70.0/24", "192.168.70.1"))
	if err := e.cl.Create(e.ctx, good); err != nil {
		t.Fatal(err)
	}
	e.waitPC(t, nsB, "owner", "accepted", func(pc *berthv1alpha1.PodConfig) bool {
		c := condition(pc, berthv1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	cases := []struct {
		name      string
		a         berthv1alpha1.NetworkAttachment
		wantField string
		wantMsg   string
	}{
		{"host interface eth0 as master", att("net1", "eth0", "192.168.71.0/24", ""), "spec.networkAttachments[0].master", "host or CNI interface"},
		{"CNI bridge cni0 as master", att("net1", "cni0", "192.168.71.0/24", ""), "spec.networkAttachments[0].master", "host or CNI interface"},
		{"bridge outside the prefix", att("net1", "tenantbr", "192.168.71.0/24", ""), "spec.networkAttachments[0].master", `does not start with "berth"`},
		{"the cluster's pod CIDR", att("net1", "berth-p1", "10.244.8.0/24", ""), "spec.networkAttachments[0].cidr", "overlaps the cluster's network 10.244.0.0/16"},
		{"the cluster's service CIDR", att("net1", "berth-p1", "10.96.0.0/24", ""), "spec.networkAttachments[0].cidr", "overlaps the cluster's network 10.96.0.0/16"},
		{"parent not allow-listed", berthv1alpha1.NetworkAttachment{Name: "net1", LinkType: berthv1alpha1.LinkVLAN, Master: "berth-p1", Parent: "eth0", VLANID: ptr.To[int32](7), CIDR: "192.168.71.0/24"}, "spec.networkAttachments[0].parent", "not in the operator's allowed parents"},
		{"another PodConfig's bridge with another cidr", att("net1", "berth-p0", "192.168.72.0/24", ""), "spec.networkAttachments[0].cidr", "already carries 192.168.70.0/24 for PodConfig tenant-b/owner"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("hostile-%d", i)
			if err := e.cl.Create(e.ctx, pcObj(nsA, name, tc.a)); err != nil {
				t.Fatalf("the API server should accept it (the operator's policy refuses it): %v", err)
			}
			// A pod it selects: nothing may be allocated for it.
			pods := e.createPods(t, nsA, name, 1, map[string]string{berthv1alpha1.PodConfigLabel: name})
			pc := e.waitPC(t, nsA, name, "Degraded naming "+tc.wantField, func(pc *berthv1alpha1.PodConfig) bool {
				c := condition(pc, berthv1alpha1.ConditionDegraded)
				return c != nil && c.Status == metav1.ConditionTrue && pc.Status.ObservedGeneration == pc.Generation
			})
			c := condition(pc, berthv1alpha1.ConditionDegraded)
			if c.Reason != "InvalidSpec" || !strings.Contains(c.Message, tc.wantField) || !strings.Contains(c.Message, tc.wantMsg) || pc.Status.Phase != berthv1alpha1.PodConfigFailed {
				t.Fatalf("want phase Failed and Degraded InvalidSpec naming %s (%q), got %s %s: %s", tc.wantField, tc.wantMsg, pc.Status.Phase, c.Reason, c.Message)
			}
			if len(pc.Status.Pods) != 0 {
				t.Fatalf("refused PodConfig has pod entries: %+v", pc.Status.Pods)
			}
			if allocs := e.allocations(t, tc.a.Master, tc.a.CIDR); len(allocs) != 0 {
				t.Fatalf("refused PodConfig got addresses: %v", allocs)
			}
			e.deletePod(t, pods[0])
			if err := e.cl.Delete(e.ctx, pc); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := e.cl.Delete(e.ctx, good); err != nil {
		t.Fatal(err)
	}
}

func (e *env) testNamespaced(t *testing.T) {
	// The API has no way to name another namespace: an attempt is refused as an unknown field.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "berth.dev/v1alpha1", "kind": "PodConfig",
		"metadata": map[string]any{"name": "cross", "namespace": nsB},
		"spec": map[string]any{
			"namespaceSelector":  map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": nsA}},
			"networkAttachments": []any{map[string]any{"name": "net1", "master": "berth-x0", "cidr": "192.168.80.0/24"}},
		},
	}}
	gvr := berthv1alpha1.GroupVersion.WithResource("podconfigs")
	_, err := e.dyn.Resource(gvr).Namespace(nsB).Create(e.ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
	if err == nil || !strings.Contains(err.Error(), "namespaceSelector") {
		t.Fatalf("want namespaceSelector refused as unknown, got %v", err)
	}
	// A selector matching pods of tenant-a, from tenant-b: selects nothing.
	pods := e.createPods(t, nsA, "victim", 1, map[string]string{"app": "victim"})
	pc := pcObj(nsB, "cross", att("net1", "berth-x0", "192.168.80.0/24", ""))
	pc.Spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "victim"}}
	if err := e.cl.Create(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
	got := e.waitPC(t, nsB, "cross", "reconciled", func(pc *berthv1alpha1.PodConfig) bool {
		return pc.Status.ObservedGeneration == pc.Generation && pc.Status.Phase != ""
	})
	if got.Status.PodCount != 0 || len(got.Status.Pods) != 0 || got.Status.Phase != berthv1alpha1.PodConfigPending {
		t.Fatalf("tenant-b's PodConfig reached tenant-a's pod: %+v", got.Status)
	}
	if allocs := e.allocations(t, "berth-x0", "192.168.80.0/24"); len(allocs) != 0 {
		t.Fatalf("addresses allocated across namespaces: %v", allocs)
	}
	e.deletePod(t, pods[0])
	if err := e.cl.Delete(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
}

const (
	webMaster = "berth-web"
	webCIDR   = "192.168.50.0/29" // gateway .1: five addresses (.2-.6) for pods
)

func (e *env) testAllocations(t *testing.T) {
	pc := pcObj(nsA, "web", att("net1", webMaster, webCIDR, "192.168.50.1"))
	if err := e.cl.Create(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
	web := map[string]string{berthv1alpha1.PodConfigLabel: "web"}
	pods := e.createPods(t, nsA, "web", 3, web)
	allocs := e.waitAllocations(t, webMaster, webCIDR, "3 addresses", func(m map[string]berthv1alpha1.Allocation) bool { return len(m) == 3 })
	for addr, a := range allocs {
		if addr == "192.168.50.0" || addr == "192.168.50.1" || addr == "192.168.50.7" {
			t.Fatalf("reserved address %s allocated to %s", addr, a.PodName)
		}
	}
	got := e.waitPC(t, nsA, "web", "3 Allocated entries", func(pc *berthv1alpha1.PodConfig) bool {
		n := 0
		for _, p := range pc.Status.Pods {
			if p.State == berthv1alpha1.AttachmentAllocated {
				n++
			}
		}
		return n == 3 && pc.Status.PodCount == 3
	})
	for _, p := range got.Status.Pods {
		a, ok := allocs[strings.TrimSuffix(p.Address, "/29")]
		if !ok || a.PodUID != p.PodUID || a.Attachment != "net1" || a.Node != p.Node || !strings.HasSuffix(p.Address, "/29") {
			t.Fatalf("status entry %+v does not match IPAllocation %v", p, allocs)
		}
	}
	if got.Status.Phase != berthv1alpha1.PodConfigConfiguring {
		t.Fatalf("phase %s, want Configuring (no agent has reported)", got.Status.Phase)
	}

	// Three more: five addresses for six pods.
	more := e.createPods(t, nsA, "web-more", 3, web)
	var failed string
	e.waitPC(t, nsA, "web", "one entry Failed exhausted", func(pc *berthv1alpha1.PodConfig) bool {
		for _, p := range pc.Status.Pods {
			if p.State == berthv1alpha1.AttachmentFailed && strings.Contains(p.LastError, "network 192.168.50.0/29 on berth-web exhausted") {
				failed = p.Pod
			}
		}
		return failed != "" && pc.Status.Phase == berthv1alpha1.PodConfigFailed
	})
	if m := e.allocations(t, webMaster, webCIDR); len(m) != 5 {
		t.Fatalf("want the pool full (5), got %v", m)
	}
	e.waitEvent(t, nsA, "web", "NetworkExhausted")

	// Freeing one address (its pod deleted) gives it to the failed pod.
	victim := pods[0]
	if victim.Name == failed {
		victim = pods[1]
	}
	e.deletePod(t, victim)
	e.waitPC(t, nsA, "web", "the failed pod allocated after a pod was deleted", func(pc *berthv1alpha1.PodConfig) bool {
		n := 0
		for _, p := range pc.Status.Pods {
			if p.Pod == victim.Name {
				return false
			}
			if p.State == berthv1alpha1.AttachmentAllocated {
				n++
			}
		}
		return n == 5
	})
	final := e.waitAllocations(t, webMaster, webCIDR, "5 addresses, none for the deleted pod", func(m map[string]berthv1alpha1.Allocation) bool {
		for _, a := range m {
			if a.PodUID == string(victim.UID) {
				return false
			}
		}
		return len(m) == 5
	})
	_ = more
	_ = final
}

func (e *env) waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := e.c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, ev := range list.Items {
			if ev.Regarding.Name == name && ev.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event for %s/%s", reason, ns, name)
	}
}

func (e *env) testRestart(t *testing.T, op *cluster.Process) {
	before := e.allocations(t, webMaster, webCIDR)
	if len(before) != 5 {
		t.Fatalf("want the web pool full before the restart, got %v", before)
	}
	// Kill (no graceful shutdown), free an address while no operator runs, then start a new one.
	_ = syscall.Kill(op.PID(), syscall.SIGKILL)
	op.Stop(time.Second)
	var gone *corev1.Pod
	var list corev1.PodList
	if err := e.cl.List(e.ctx, &list, client.InNamespace(nsA), client.MatchingLabels{berthv1alpha1.PodConfigLabel: "web"}); err != nil {
		t.Fatal(err)
	}
	gone = &list.Items[0]
	e.deletePod(t, gone)
	newPods := e.createPods(t, nsA, "web-late", 1, map[string]string{berthv1alpha1.PodConfigLabel: "web"})
	e.startOperator("berth-operator-2")
	after := e.waitAllocations(t, webMaster, webCIDR, "the deleted pod's address freed and reused by the new pod", func(m map[string]berthv1alpha1.Allocation) bool {
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

func (e *env) testRace(t *testing.T) {
	e.startOperator("berth-operator-3")
	const master, cidr, pods = "berth-race", "192.168.90.0/26", 24
	pc := pcObj(nsB, "race", att("net1", master, cidr, "192.168.90.1"))
	if err := e.cl.Create(e.ctx, pc); err != nil {
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
			if err := e.cl.Get(e.ctx, client.ObjectKey{Name: podconfig.NetworkName(master, netip.MustParsePrefix(cidr))}, obj); err != nil {
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
	e.createPods(t, nsB, "race", pods, map[string]string{berthv1alpha1.PodConfigLabel: "race"})
	final := e.waitAllocations(t, master, cidr, fmt.Sprintf("%d addresses", pods), func(m map[string]berthv1alpha1.Allocation) bool { return len(m) == pods })
	got := e.waitPC(t, nsB, "race", "every pod Allocated", func(pc *berthv1alpha1.PodConfig) bool {
		n := 0
		for _, p := range pc.Status.Pods {
			if p.State == berthv1alpha1.AttachmentAllocated {
				n++
			}
		}
		return n == pods
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
	if len(uids) != pods {
		t.Fatalf("%d pods hold the %d addresses, want one each", len(uids), len(final))
	}
	for _, p := range got.Status.Pods {
		if a, ok := final[strings.TrimSuffix(p.Address, "/26")]; !ok || a.PodUID != p.PodUID {
			t.Fatalf("status entry %+v disagrees with the IPAllocation", p)
		}
	}
}

// applyAgent server-side-applies a node's entries as that node's agent does.
func (e *env) applyAgent(t *testing.T, ns, name, node string, entries []berthv1alpha1.PodAttachmentStatus) {
	t.Helper()
	var list []any
	for _, p := range entries {
		if p.Node != node {
			continue
		}
		list = append(list, map[string]any{
			"pod": p.Pod, "attachment": p.Attachment, "podUID": p.PodUID, "node": node, "interface": p.Attachment,
			"address": p.Address, "bridge": p.Bridge, "hostPeer": podconfig.HostPeerName(p.PodUID, p.Attachment),
			"state": string(p.State), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
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

func (e *env) testAgentsAndDeletion(t *testing.T) {
	pc := e.waitPC(t, nsB, "race", "entries", func(pc *berthv1alpha1.PodConfig) bool { return len(pc.Status.Pods) > 0 })
	// Each node's agent reports its own entries Configured; the operator keeps them and
	// reaches Configured / Ready.
	for _, node := range []string{"n1", "n2"} {
		var mine []berthv1alpha1.PodAttachmentStatus
		for _, p := range pc.Status.Pods {
			p.State = berthv1alpha1.AttachmentConfigured
			mine = append(mine, p)
		}
		e.applyAgent(t, nsB, "race", node, mine)
	}
	pc = e.waitPC(t, nsB, "race", "Configured and Ready", func(pc *berthv1alpha1.PodConfig) bool {
		c := condition(pc, berthv1alpha1.ConditionReady)
		return pc.Status.Phase == berthv1alpha1.PodConfigConfigured && c != nil && c.Status == metav1.ConditionTrue && int(pc.Status.ConfiguredCount) == 24
	})
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
	pc = e.waitPC(t, nsB, "race", "every entry Removing", func(pc *berthv1alpha1.PodConfig) bool {
		for _, p := range pc.Status.Pods {
			if p.State != berthv1alpha1.AttachmentRemoving {
				return false
			}
		}
		return len(pc.Status.Pods) == 24
	})
	if m := e.allocations(t, "berth-race", "192.168.90.0/26"); len(m) != 24 {
		t.Fatalf("addresses freed before the agents confirmed removal: %d left", len(m))
	}
	// n1 reports first: only its addresses are freed.
	removed := func(node string) {
		var mine []berthv1alpha1.PodAttachmentStatus
		for _, p := range pc.Status.Pods {
			p.State = berthv1alpha1.AttachmentRemoved
			mine = append(mine, p)
		}
		e.applyAgent(t, nsB, "race", node, mine)
	}
	removed("n1")
	e.waitAllocations(t, "berth-race", "192.168.90.0/26", "n1's 12 addresses freed", func(m map[string]berthv1alpha1.Allocation) bool {
		for _, a := range m {
			if a.Node == "n1" {
				return false
			}
		}
		return len(m) == 12
	})
	if err := e.cl.Get(e.ctx, client.ObjectKeyFromObject(pc), &berthv1alpha1.PodConfig{}); err != nil {
		t.Fatalf("PodConfig gone while n2 has not reported: %v", err)
	}
	removed("n2")
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(pc), &berthv1alpha1.PodConfig{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("PodConfig not deleted after every agent reported removal: %v", err)
	}
	if m := e.allocations(t, "berth-race", "192.168.90.0/26"); m != nil {
		t.Fatalf("empty IPAllocation of a network nobody uses was kept: %v", m)
	}
}
