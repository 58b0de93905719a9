package podnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

const node = "node-1"

type fakeResolver struct {
	sandboxes map[string]Sandbox
	err       error
}

func (f *fakeResolver) Sandbox(_ context.Context, uid string) (Sandbox, error) {
	if f.err != nil {
		return Sandbox{}, f.err
	}
	sb, ok := f.sandboxes[uid]
	if !ok {
		return Sandbox{}, ErrNoSandbox
	}
	return sb, nil
}

type fakeDataplane struct {
	hostRanges []podconfig.NamedPrefix
	applied    []Attachment
	removed    []string
	peers      []string
	applyErr   error
	keptBr     map[string]bool
	keptVLANs  map[string]bool
	gcOrder    []string
}

func (f *fakeDataplane) Apply(a Attachment) error {
	if f.applyErr != nil {
		return f.applyErr
	}
	f.applied = append(f.applied, a)
	return nil
}
func (f *fakeDataplane) Remove(hp string) error       { f.removed = append(f.removed, hp); return nil }
func (f *fakeDataplane) HostPeers() ([]string, error) { return f.peers, nil }
func (f *fakeDataplane) HostRanges() ([]podconfig.NamedPrefix, error) {
	return f.hostRanges, nil
}
func (f *fakeDataplane) RemoveUnusedBridges(keep map[string]bool) ([]string, error) {
	f.keptBr = keep
	f.gcOrder = append(f.gcOrder, "bridges")
	return nil, nil
}
func (f *fakeDataplane) RemoveUnusedVLANs(keep map[string]bool) ([]string, error) {
	f.keptVLANs = keep
	f.gcOrder = append(f.gcOrder, "vlans")
	return nil, nil
}

type fakeStatus struct {
	calls int
	got   []berthv1alpha1.PodAttachmentStatus
}

func (f *fakeStatus) Apply(_ context.Context, ns, name string, entries []berthv1alpha1.PodAttachmentStatus) error {
	f.calls++
	f.got = append([]berthv1alpha1.PodAttachmentStatus(nil), entries...)
	return nil
}

func pcOf(entries ...berthv1alpha1.PodAttachmentStatus) *berthv1alpha1.PodConfig {
	return &berthv1alpha1.PodConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "cnf", Namespace: "ns"},
		Spec: berthv1alpha1.PodConfigSpec{NetworkAttachments: []berthv1alpha1.NetworkAttachment{
			{Name: "net1", Network: "blue"},
		}},
		Status: berthv1alpha1.PodConfigStatus{Pods: entries},
	}
}

// blueNetwork is the accepted PodNetwork pcOf's attachment names; it grants namespaces
// labelled team=blue (namespace ns is).
func blueNetwork(mut ...func(*berthv1alpha1.PodNetworkSpec)) *berthv1alpha1.PodNetwork {
	pn := &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "blue"},
		Spec: berthv1alpha1.PodNetworkSpec{Bridge: "berth0", CIDR: "192.168.100.0/24", Gateway: "192.168.100.1", MTU: ptr.To[int32](1400),
			Routes:            []berthv1alpha1.Route{{Destination: "10.50.0.0/16"}},
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}},
		Status: berthv1alpha1.PodNetworkStatus{Conditions: []metav1.Condition{{Type: berthv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue}}}}
	for _, m := range mut {
		m(&pn.Spec)
	}
	return pn
}

func allocOf(entries ...berthv1alpha1.Allocation) *berthv1alpha1.IPAllocation {
	return &berthv1alpha1.IPAllocation{ObjectMeta: metav1.ObjectMeta{Name: "blue"},
		Spec: berthv1alpha1.IPAllocationSpec{Master: "berth0", CIDR: "192.168.100.0/24", Gateway: "192.168.100.1", Allocations: entries}}
}

func podOf(name, uid string, phase corev1.PodPhase, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func entryOf(pod, uid, nodeName string, state berthv1alpha1.AttachmentState, addr string) berthv1alpha1.PodAttachmentStatus {
	return berthv1alpha1.PodAttachmentStatus{Pod: pod, Attachment: "net1", PodUID: uid, Node: nodeName, Address: addr, Bridge: "berth0", Interface: "net1", State: state}
}

type harness struct {
	e  *Executor
	dp *fakeDataplane
	st *fakeStatus
	// networks, namespaces and nodes are the executor's caches, for tests that change them.
	networks, namespaces, nodes cache.Indexer
}

func newHarness(t *testing.T, res *fakeResolver, dp *fakeDataplane, pcs []*berthv1alpha1.PodConfig, allocs []*berthv1alpha1.IPAllocation, pods []*corev1.Pod) harness {
	t.Helper()
	pci := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	ali := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pni := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	nsi := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	podi := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = pni.Add(blueNetwork())
	_ = nsi.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "blue"}}})
	for _, o := range pcs {
		_ = pci.Add(o)
	}
	for _, o := range allocs {
		_ = ali.Add(o)
	}
	for _, o := range pods {
		_ = podi.Add(o)
	}
	nodei := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	st := &fakeStatus{}
	e, err := New(Config{NodeName: node, Resolver: res, Dataplane: dp, Status: st, Nodes: corelisters.NewNodeLister(nodei),
		Now: func() time.Time { return time.Unix(1000, 0) }}, pci, ali, pni, corelisters.NewNamespaceLister(nsi), corelisters.NewPodLister(podi))
	if err != nil {
		t.Fatal(err)
	}
	return harness{e: e, dp: dp, st: st, networks: pni, namespaces: nsi, nodes: nodei}
}

func TestSync(t *testing.T) {
	hpA := podconfig.HostPeerName("uid-a", "net1")
	sbA := map[string]Sandbox{"uid-a": {ID: "sb-a", NetNS: "/proc/42/ns/net"}}
	allocA := allocOf(berthv1alpha1.Allocation{Address: "192.168.100.2", PodNamespace: "ns", PodName: "a", PodUID: "uid-a", PodConfig: "cnf", Attachment: "net1", Node: node})
	running := podOf("a", "uid-a", corev1.PodRunning)
	allocated := entryOf("a", "uid-a", node, berthv1alpha1.AttachmentAllocated, "192.168.100.2/24")
	vanishedErr := &NetNSError{Path: "/proc/42/ns/net", Err: fmt.Errorf("open: %w", os.ErrNotExist)}

	for _, tc := range []struct {
		name      string
		pc        *berthv1alpha1.PodConfig
		network   *berthv1alpha1.PodNetwork // nil: blueNetwork()
		nsLabels  map[string]string         // nil: team=blue
		hostNets  []podconfig.NamedPrefix
		nodes     []*corev1.Node // the cluster's nodes in the agent's cache
		pods      []*corev1.Pod
		allocs    []*berthv1alpha1.IPAllocation
		res       *fakeResolver
		applyErr  error
		wantState berthv1alpha1.AttachmentState // "" = no status write
		wantErr   string
		wantApply bool
		wantRm    bool
		requeue   bool
	}{
		{name: "allocated and sandbox ready: configured with the allocation's address", pc: pcOf(allocated), pods: []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA},
			res: &fakeResolver{sandboxes: sbA}, wantState: berthv1alpha1.AttachmentConfigured, wantApply: true},
		{name: "configured already: applied again (idempotent), no write", pc: pcOf(func() berthv1alpha1.PodAttachmentStatus {
			e := allocated
			e.State, e.HostPeer = berthv1alpha1.AttachmentConfigured, hpA
			return e
		}()), pods: []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA}, wantApply: true},
		{name: "no allocation seen yet: nothing done, nothing said", pc: pcOf(allocated), pods: []*corev1.Pod{running},
			res: &fakeResolver{sandboxes: sbA}},
		{name: "pod not in the node's cache: nothing done", pc: pcOf(allocated), allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA}},
		{name: "pod with another UID (re-created): nothing done", pc: pcOf(allocated), pods: []*corev1.Pod{podOf("a", "uid-other", corev1.PodRunning)},
			allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA}},
		{name: "pending pod without a sandbox yet: retried quietly", pc: pcOf(allocated), pods: []*corev1.Pod{podOf("a", "uid-a", corev1.PodPending)},
			allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{}, requeue: true},
		{name: "running pod without a ready sandbox: Failed, retried", pc: pcOf(allocated), pods: []*corev1.Pod{running},
			allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{}, wantState: berthv1alpha1.AttachmentFailed, wantErr: "no ready sandbox", requeue: true},
		{name: "runtime socket gone: Failed naming it", pc: pcOf(allocated), pods: []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA},
			res:       &fakeResolver{err: &RuntimeError{Err: errors.New("CRI socket /run/containerd/containerd.sock: no such file or directory")}},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "container runtime unreachable: CRI socket /run/containerd/containerd.sock", requeue: true},
		{name: "runtime gone but already configured: the working link keeps its state", pc: pcOf(func() berthv1alpha1.PodAttachmentStatus {
			e := allocated
			e.State, e.HostPeer = berthv1alpha1.AttachmentConfigured, hpA
			return e
		}()), pods: []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{err: &RuntimeError{Err: errors.New("down")}}, requeue: true},
		{name: "namespace vanished mid-apply: Failed, half-made pair removed, retried", pc: pcOf(allocated), pods: []*corev1.Pod{running},
			allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA}, applyErr: vanishedErr,
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "vanished while it was being configured", wantRm: true, requeue: true},
		{name: "interface name taken in the pod: Failed with the conflict", pc: pcOf(allocated), pods: []*corev1.Pod{running},
			allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA}, applyErr: &ConflictError{Msg: "interface net1 already exists in the pod and is not Berth's veth"},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "already exists in the pod"},
		{name: "host-network pod: Failed, never touched", pc: pcOf(allocated), pods: []*corev1.Pod{podOf("a", "uid-a", corev1.PodRunning, func(p *corev1.Pod) { p.Spec.HostNetwork = true })},
			allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA}, wantState: berthv1alpha1.AttachmentFailed, wantErr: "host network"},
		{name: "operator's failure (no address, e.g. exhausted): left alone", pc: pcOf(func() berthv1alpha1.PodAttachmentStatus {
			e := allocated
			e.State, e.Address, e.LastError = berthv1alpha1.AttachmentFailed, "", "network 192.168.100.0/24 on berth0 exhausted"
			return e
		}()), pods: []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA}},
		{name: "Removing: links removed, Removed reported", pc: pcOf(func() berthv1alpha1.PodAttachmentStatus {
			e := allocated
			e.State = berthv1alpha1.AttachmentRemoving
			return e
		}()), res: &fakeResolver{}, wantState: berthv1alpha1.AttachmentRemoved, wantRm: true},
		{name: "PodConfig deleting: links removed even before the operator marks Removing", pc: func() *berthv1alpha1.PodConfig {
			p := pcOf(allocated)
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(999, 0)}
			return p
		}(), res: &fakeResolver{}, wantState: berthv1alpha1.AttachmentRemoved, wantRm: true},
		{name: "network the agent refuses (written around the CRD): Failed naming the field, link removed", pc: pcOf(allocated),
			network: blueNetwork(func(s *berthv1alpha1.PodNetworkSpec) { s.Gateway = "192.168.100.255" }),
			pods:    []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "spec.networkAttachments[0].network: Invalid value: \"blue\": PodNetwork blue: spec.gateway", wantRm: true},
		{name: "network overlapping the node's own range: Failed naming it, link removed", pc: pcOf(allocated),
			hostNets: []podconfig.NamedPrefix{{Prefix: netip.MustParsePrefix("192.168.0.0/16"), Name: "the node's network on eth0"}},
			pods:     []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "overlaps the node's network on eth0 192.168.0.0/16", wantRm: true},
		{name: "gateway that is another node's address (issue 35): Failed naming node, address and field, link removed", pc: pcOf(allocated),
			nodes: []*corev1.Node{nodeAt(node, "10.0.0.1"), nodeAt("berth-real-3", "192.168.100.1")},
			pods:  []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "spec.gateway: Forbidden: 192.168.100.1 is node berth-real-3's InternalIP", wantRm: true},
		{name: "range holding another node's address: Failed naming it, link removed", pc: pcOf(allocated),
			nodes: []*corev1.Node{nodeAt("berth-real-2", "192.168.100.77")},
			pods:  []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "spec.cidr: Forbidden: 192.168.100.0/24 overlaps node berth-real-2's InternalIP 192.168.100.77/32", wantRm: true},
		{name: "route through another node's address: Failed naming the route, link removed", pc: pcOf(allocated),
			nodes: []*corev1.Node{nodeAt("berth-real-2", "10.50.3.1")},
			pods:  []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "spec.routes[0].destination: Forbidden: 10.50.0.0/16 overlaps node berth-real-2's InternalIP", wantRm: true},
		{name: "other nodes clear of the network: configured", pc: pcOf(allocated),
			nodes: []*corev1.Node{nodeAt(node, "10.0.0.1"), nodeAt("berth-real-2", "10.0.1.1"), nodeAt("kwok-0", "127.0.0.1")},
			pods:  []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA},
			wantState: berthv1alpha1.AttachmentConfigured, wantApply: true},
		{name: "a route to the metadata address: Failed naming it, link removed", pc: pcOf(allocated),
			network: blueNetwork(func(s *berthv1alpha1.PodNetworkSpec) {
				s.Routes = []berthv1alpha1.Route{{Destination: "169.254.169.254/32"}}
			}),
			pods: []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "spec.routes[0].destination: Forbidden: 169.254.169.254/32 overlaps link-local", wantRm: true},
		{name: "grant revoked (the operator has not caught up): Failed, link removed", pc: pcOf(allocated), nsLabels: map[string]string{"team": "red"},
			pods: []*corev1.Pod{running}, allocs: []*berthv1alpha1.IPAllocation{allocA}, res: &fakeResolver{sandboxes: sbA},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "spec.networkAttachments[0].network: Forbidden: PodNetwork blue does not grant namespace ns", wantRm: true},
		{name: "another node's entry: neither acted on nor sent", pc: pcOf(entryOf("b", "uid-b", "node-2", berthv1alpha1.AttachmentAllocated, "192.168.100.3/24")),
			res: &fakeResolver{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dp := &fakeDataplane{applyErr: tc.applyErr, hostRanges: tc.hostNets}
			h := newHarness(t, tc.res, dp, []*berthv1alpha1.PodConfig{tc.pc}, tc.allocs, tc.pods)
			if tc.network != nil {
				_ = h.networks.Update(tc.network)
			}
			for _, n := range tc.nodes {
				_ = h.nodes.Add(n)
			}
			if tc.nsLabels != nil {
				_ = h.namespaces.Update(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: tc.nsLabels}})
			}
			requeue, err := h.e.Sync(context.Background(), "ns/cnf")
			if err != nil {
				t.Fatal(err)
			}
			if (requeue > 0) != tc.requeue {
				t.Errorf("requeue %v, want %v", requeue, tc.requeue)
			}
			if got := len(dp.applied) > 0; got != tc.wantApply {
				t.Errorf("applied %v, want %v", dp.applied, tc.wantApply)
			}
			if got := slices.Contains(dp.removed, hpA); got != tc.wantRm {
				t.Errorf("removed %v, want removal of %s: %v", dp.removed, hpA, tc.wantRm)
			}
			if tc.wantState == "" {
				if h.st.calls != 0 {
					t.Errorf("status written %+v, want none", h.st.got)
				}
				return
			}
			if h.st.calls != 1 || len(h.st.got) != 1 {
				t.Fatalf("status writes %d with %+v, want one write of one entry", h.st.calls, h.st.got)
			}
			got := h.st.got[0]
			if got.State != tc.wantState || !strings.Contains(got.LastError, tc.wantErr) || (tc.wantErr == "" && got.LastError != "") {
				t.Errorf("entry %+v, want state %s error %q", got, tc.wantState, tc.wantErr)
			}
			if got.LastTransitionTime == nil || !got.LastTransitionTime.Time.Equal(time.Unix(1000, 0)) {
				t.Errorf("lastTransitionTime %v, want the state change's time", got.LastTransitionTime)
			}
			if got.Pod != "a" || got.Attachment != "net1" || got.PodUID != "uid-a" || got.Node != node {
				t.Errorf("keys changed: %+v", got)
			}
			refused := strings.Contains(tc.wantErr, "spec") || strings.Contains(tc.wantErr, "overlaps")
			if tc.wantState != berthv1alpha1.AttachmentRemoved && got.Address != "192.168.100.2/24" && tc.wantErr != "host network" && !refused {
				t.Errorf("address %q, want the allocation's 192.168.100.2/24 (kept on failure)", got.Address)
			}
			if got.HostPeer != hpA && tc.wantErr != "host network" && !refused {
				t.Errorf("hostPeer %q, want %s", got.HostPeer, hpA)
			}
		})
	}

	t.Run("the attachment made is the network's and the allocation's", func(t *testing.T) {
		dp := &fakeDataplane{}
		h := newHarness(t, &fakeResolver{sandboxes: sbA}, dp, []*berthv1alpha1.PodConfig{pcOf(allocated)}, []*berthv1alpha1.IPAllocation{allocA}, []*corev1.Pod{running})
		if _, err := h.e.Sync(context.Background(), "ns/cnf"); err != nil {
			t.Fatal(err)
		}
		want := Attachment{NetNS: "/proc/42/ns/net", Interface: "net1", HostPeer: hpA, Bridge: "berth0", Gateway: netip.MustParseAddr("192.168.100.1"),
			Address: netip.MustParsePrefix("192.168.100.2/24"), MTU: 1400, Alias: "ns/a net1",
			Routes: []RouteSpec{{Dst: netip.MustParsePrefix("10.50.0.0/16"), Via: netip.MustParseAddr("192.168.100.1")}}}
		if len(dp.applied) != 1 || fmt.Sprint(dp.applied[0]) != fmt.Sprint(want) {
			t.Errorf("applied %+v, want %+v", dp.applied, want)
		}
	})

	t.Run("every entry of the node is sent together; other nodes' are not", func(t *testing.T) {
		dp := &fakeDataplane{}
		other := entryOf("b", "uid-b", "node-2", berthv1alpha1.AttachmentAllocated, "192.168.100.3/24")
		waiting := entryOf("c", "uid-c", node, berthv1alpha1.AttachmentAllocated, "192.168.100.4/24")
		h := newHarness(t, &fakeResolver{sandboxes: sbA}, dp, []*berthv1alpha1.PodConfig{pcOf(allocated, other, waiting)}, []*berthv1alpha1.IPAllocation{allocA}, []*corev1.Pod{running})
		if _, err := h.e.Sync(context.Background(), "ns/cnf"); err != nil {
			t.Fatal(err)
		}
		var pods []string
		for _, g := range h.st.got {
			pods = append(pods, g.Pod+"="+string(g.State))
		}
		if !slices.Equal(pods, []string{"a=Configured", "c=Allocated"}) {
			t.Errorf("applied %v, want a=Configured and c as it stands (SSA drops fields a manager stops sending)", pods)
		}
	})
}

func TestSweep(t *testing.T) {
	keepHP := podconfig.HostPeerName("uid-a", "net1")
	staleHP := podconfig.HostPeerName("uid-gone", "net1")
	otherNodeHP := podconfig.HostPeerName("uid-elsewhere", "net1")
	dp := &fakeDataplane{peers: []string{keepHP, staleHP, otherNodeHP}}
	allocs := []*berthv1alpha1.IPAllocation{allocOf(
		berthv1alpha1.Allocation{Address: "192.168.100.2", PodUID: "uid-a", Attachment: "net1", Node: node},
		berthv1alpha1.Allocation{Address: "192.168.100.3", PodUID: "uid-elsewhere", Attachment: "net1", Node: "node-2"},
	)}
	removing := entryOf("r", "uid-r", node, berthv1alpha1.AttachmentRemoving, "192.168.100.5/24")
	removing.Bridge = "berth-old"
	pcs := []*berthv1alpha1.PodConfig{pcOf(entryOf("a", "uid-a", node, berthv1alpha1.AttachmentConfigured, "192.168.100.2/24"), removing)}
	h := newHarness(t, &fakeResolver{}, dp, pcs, allocs, nil)
	if err := h.e.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	// why: a link of this node whose allocation is gone is stale; a link named after another
	// node's allocation cannot be this node's (same pod UID is impossible), so it goes too.
	slices.Sort(dp.removed)
	want := []string{staleHP, otherNodeHP}
	slices.Sort(want)
	if !slices.Equal(dp.removed, want) {
		t.Errorf("removed %v, want %v", dp.removed, want)
	}
	if !dp.keptBr["berth0"] || dp.keptBr["berth-old"] {
		t.Errorf("bridges kept %v, want berth0 (live entry) and not berth-old (only a Removing entry)", dp.keptBr)
	}
}

// vlanNetwork is blueNetwork with VLAN 10 of parent.
func vlanNetwork(parent string) *berthv1alpha1.PodNetwork {
	return blueNetwork(func(s *berthv1alpha1.PodNetworkSpec) { s.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 10, Parent: parent} })
}

func TestSyncVLAN(t *testing.T) {
	sbA := map[string]Sandbox{"uid-a": {ID: "sb-a", NetNS: "/proc/42/ns/net"}}
	allocA := allocOf(berthv1alpha1.Allocation{Address: "192.168.100.2", PodNamespace: "ns", PodName: "a", PodUID: "uid-a", PodConfig: "cnf", Attachment: "net1", Node: node})
	running := podOf("a", "uid-a", corev1.PodRunning)
	allocated := entryOf("a", "uid-a", node, berthv1alpha1.AttachmentAllocated, "192.168.100.2/24")
	policy := podconfig.Policy{AllowedParents: []string{"trunk0"}}

	for _, tc := range []struct {
		name      string
		pc        *berthv1alpha1.PodConfig
		network   *berthv1alpha1.PodNetwork
		policy    podconfig.Policy
		applyErr  error
		wantVLAN  *VLANSpec
		wantState berthv1alpha1.AttachmentState
		wantErr   string
		requeue   bool
	}{
		{name: "allowed parent: the veth and VLAN 10 of the parent on the bridge", pc: pcOf(allocated), network: vlanNetwork("trunk0"), policy: policy,
			wantVLAN: &VLANSpec{Parent: "trunk0", ID: 10}, wantState: berthv1alpha1.AttachmentConfigured},
		{name: "parent not allowed on this node: Failed naming the field, nothing made", pc: pcOf(allocated), network: vlanNetwork("eth9"), policy: policy,
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "PodNetwork blue: spec.vlan.parent: Forbidden: eth9 is not in the allowed parents"},
		{name: "no parent allowed at all (the default): Failed, nothing made", pc: pcOf(allocated), network: vlanNetwork("trunk0"),
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "spec.vlan.parent: Forbidden"},
		{name: "a host interface as parent: Failed naming it", pc: pcOf(allocated), network: vlanNetwork("eth0"), policy: podconfig.Policy{AllowedParents: []string{"trunk0"}},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "spec.vlan.parent: Forbidden: eth0 is not in the allowed parents"},
		{name: "kernel without 802.1Q: Failed saying so, no fast retry", pc: pcOf(allocated), network: vlanNetwork("trunk0"), policy: policy,
			applyErr:  &UnsupportedError{Msg: "cannot create VLAN 10 of trunk0: the node's kernel has no 802.1Q VLAN support"},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "no 802.1Q VLAN support"},
		{name: "an administrator's VLAN 10 on the parent: Failed with the conflict", pc: pcOf(allocated), network: vlanNetwork("trunk0"), policy: policy,
			applyErr:  &ConflictError{Msg: "VLAN 10 of trunk0 already exists as trunk0.10, which Berth did not create (it is left alone)"},
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "which Berth did not create"},
		{name: "parent missing on the node: Failed, retried", pc: pcOf(allocated), network: vlanNetwork("trunk0"), policy: policy,
			applyErr:  errors.New("parent trunk0 of VLAN 10 does not exist on the node"),
			wantState: berthv1alpha1.AttachmentFailed, wantErr: "parent trunk0 of VLAN 10 does not exist", requeue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dp := &fakeDataplane{applyErr: tc.applyErr}
			h := newHarness(t, &fakeResolver{sandboxes: sbA}, dp, []*berthv1alpha1.PodConfig{tc.pc}, []*berthv1alpha1.IPAllocation{allocA}, []*corev1.Pod{running})
			_ = h.networks.Update(tc.network)
			h.e.cfg.Policy = tc.policy
			h.e.cfg.Policy.BridgePrefix = podconfig.DefaultBridgePrefix
			requeue, err := h.e.Sync(context.Background(), "ns/cnf")
			if err != nil {
				t.Fatal(err)
			}
			if (requeue > 0) != tc.requeue {
				t.Errorf("requeue %v, want %v", requeue, tc.requeue)
			}
			if tc.wantVLAN != nil {
				if len(dp.applied) != 1 || dp.applied[0].VLAN == nil || *dp.applied[0].VLAN != *tc.wantVLAN || dp.applied[0].Bridge != "berth0" {
					t.Errorf("applied %+v, want VLAN %+v on berth0", dp.applied, tc.wantVLAN)
				}
			} else if tc.applyErr == nil && len(dp.applied) != 0 {
				t.Errorf("applied %+v for a refused attachment", dp.applied)
			}
			if h.st.calls != 1 || len(h.st.got) != 1 {
				t.Fatalf("status writes %d with %+v, want one write of one entry", h.st.calls, h.st.got)
			}
			got := h.st.got[0]
			if got.State != tc.wantState || !strings.Contains(got.LastError, tc.wantErr) || (tc.wantErr == "" && got.LastError != "") {
				t.Errorf("entry %+v, want state %s error %q", got, tc.wantState, tc.wantErr)
			}
		})
	}
}

// TestGCShared: a VLAN link stays exactly while a live entry of the node uses it, and goes
// before the bridges (it is a bridge port, so its bridge can only go after it).
func TestGCShared(t *testing.T) {
	policy := podconfig.Policy{BridgePrefix: "berth", AllowedParents: []string{"trunk0", "trunk1"}}
	live := pcOf(entryOf("a", "uid-a", node, berthv1alpha1.AttachmentConfigured, "192.168.100.2/24"))
	onOld := func(name string, e berthv1alpha1.PodAttachmentStatus) *berthv1alpha1.PodConfig {
		p := pcOf(e)
		p.Name, p.Spec.NetworkAttachments[0].Network = name, "old"
		return p
	}
	removing := entryOf("b", "uid-b", node, berthv1alpha1.AttachmentRemoving, "192.168.101.2/24")
	removing.Bridge = "berth1"
	gone := onOld("gone", removing)
	other := entryOf("c", "uid-c", "node-2", berthv1alpha1.AttachmentConfigured, "192.168.101.3/24")
	other.Bridge = "berth1"
	elsewhere := onOld("other", other)
	del := entryOf("d", "uid-d", node, berthv1alpha1.AttachmentConfigured, "192.168.101.4/24")
	del.Bridge = "berth1"
	deleting := onOld("deleting", del)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(999, 0)}
	dp := &fakeDataplane{}
	h := newHarness(t, &fakeResolver{}, dp, []*berthv1alpha1.PodConfig{live, gone, elsewhere, deleting}, nil, nil)
	_ = h.networks.Update(vlanNetwork("trunk0"))
	old := vlanNetwork("trunk1")
	old.Name, old.Spec.Bridge, old.Spec.CIDR, old.Spec.Gateway, old.Spec.Routes = "old", "berth1", "192.168.101.0/24", "", nil
	_ = h.networks.Add(old)
	h.e.cfg.Policy = policy
	if err := h.e.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantVLANs := map[string]bool{VLANLinkName("trunk0", 10): true}
	if fmt.Sprint(dp.keptVLANs) != fmt.Sprint(wantVLANs) {
		t.Errorf("VLAN links kept %v, want only %v (trunk1's users are Removing, deleting or on another node)", dp.keptVLANs, wantVLANs)
	}
	if !dp.keptBr["berth0"] || dp.keptBr["berth1"] {
		t.Errorf("bridges kept %v, want berth0 only", dp.keptBr)
	}
	if !slices.Equal(dp.gcOrder, []string{"vlans", "bridges"}) {
		t.Errorf("GC order %v, want VLAN links before bridges", dp.gcOrder)
	}
}

type pingResolver struct {
	fakeResolver
	mu   sync.Mutex
	errs []error // answers in turn; the last one repeats
	n    int
}

func (p *pingResolver) Ping(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.errs[min(p.n, len(p.errs)-1)]
	p.n++
	return err
}

func TestReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		synced  bool
		pings   []error
		wantErr string // "" = ready
	}{
		{name: "informers not synced", synced: false, pings: []error{nil}, wantErr: "informers (podconfigs, podnetworks, ipallocations, namespaces, pods) not synced"},
		{name: "synced, runtime answers", synced: true, pings: []error{nil}},
		{name: "synced, runtime down: not ready, the reason given", synced: true,
			pings: []error{&RuntimeError{Err: errors.New("CRI socket /run/cri.sock: no such file or directory")}}, wantErr: "container runtime not reached yet: container runtime unreachable: CRI socket /run/cri.sock"},
		{name: "runtime answers on the second try", synced: true, pings: []error{&RuntimeError{Err: errors.New("down")}, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &pingResolver{errs: tc.pings}
			h := newHarness(t, &fakeResolver{}, &fakeDataplane{}, nil, nil, nil)
			h.e.cfg.Resolver = res
			h.e.synced = []cache.InformerSynced{func() bool { return tc.synced }}
			h.e.pingEvery = 10 * time.Millisecond
			if err := h.e.Ready(); err == nil {
				t.Fatal("ready before the runtime was asked")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); h.e.reachRuntime(ctx) }()
			if tc.pings[len(tc.pings)-1] == nil {
				<-done // the runtime answered: reachRuntime is finished
			} else {
				// why: wait until the last (failing) answer was given and recorded twice, so
				// the reason read below is that answer's, not a race with the first ping.
				for {
					res.mu.Lock()
					n := res.n
					res.mu.Unlock()
					if n > len(tc.pings) {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			err := h.e.Ready()
			cancel()
			<-done
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("not ready: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Ready() = %v, want %q", err, tc.wantErr)
			}
		})
	}

	t.Run("CRIResolver.Ping against a runtime on a socket, and without one", func(t *testing.T) {
		socket, stop := serveFake(t, &fakeRuntime{})
		r := NewCRIResolver(socket, "/proc", 2*time.Second)
		defer r.Close(context.Background())
		if err := r.Ping(context.Background()); err != nil {
			t.Fatalf("ping: %v", err)
		}
		stop()
		_ = os.Remove(socket)
		var re *RuntimeError
		if err := r.Ping(context.Background()); !errors.As(err, &re) || !strings.Contains(err.Error(), socket) {
			t.Fatalf("ping without a runtime: %v, want a RuntimeError naming %s", err, socket)
		}
	})
}

func nodeAt(name string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}
