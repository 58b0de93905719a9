package controller

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
)

// The rules of a reconcile, without an API: what is freed, what is allocated, which entries
// stay while agents remove links, and when a dead node's links stop holding addresses.
func TestDecide(t *testing.T) {
	blue := podconfig.Network{Name: "blue", Bridge: "berth-blue", Prefix: netip.MustParsePrefix("192.168.1.0/24")}
	p1 := pod("p1", "n1", nil)
	att := &berthv1alpha1.NetworkAttachment{Name: "net1", Network: "blue"}
	wantP1 := map[entryKey]want{{"p1", "net1"}: {pod: p1, att: att, network: blue}}
	holds := func(uid, network, addr, podName string) map[entryKey][]held {
		return map[entryKey][]held{{uid, "net1"}: {{network: network, addr: netip.MustParseAddr(addr), podName: podName}}}
	}
	entry := func(pod, uid string, state berthv1alpha1.AttachmentState, since time.Duration) berthv1alpha1.PodAttachmentStatus {
		return berthv1alpha1.PodAttachmentStatus{Pod: pod, Attachment: "net1", PodUID: uid, Node: "n1", Address: "192.168.1.1/24",
			State: state, LastTransitionTime: &metav1.Time{Time: t0.Add(-since)}}
	}
	existing := func(es ...berthv1alpha1.PodAttachmentStatus) map[entryKey]berthv1alpha1.PodAttachmentStatus {
		m := map[entryKey]berthv1alpha1.PodAttachmentStatus{}
		for _, e := range es {
			m[entryKey{e.Pod, e.Attachment}] = e
		}
		return m
	}
	cases := []struct {
		name         string
		s            snapshot
		wantRelease  []string // network/uid
		wantAllocate []string // pod
		wantHeld     []string // pod=addr
		wantRemoving []string // pod
		wantTimedOut int
		wantRequeue  time.Duration
	}{
		{name: "a new pod is allocated", s: snapshot{wants: wantP1}, wantAllocate: []string{"p1"}},
		{name: "an address the cache shows held is not asked again", s: snapshot{wants: wantP1, holdings: holds("uid-p1", "blue", "192.168.1.9", "p1")},
			wantHeld: []string{"p1=192.168.1.9"}},
		{name: "held in a network the attachment no longer names: freed, and allocated anew",
			s:           snapshot{wants: wantP1, holdings: holds("uid-p1", "old", "10.1.0.2", "p1")},
			wantRelease: []string{"old/uid-p1"}, wantAllocate: []string{"p1"}},
		{name: "a pod re-created under the same name: the old pod's address goes",
			s: snapshot{wants: wantP1, existing: existing(entry("p1", "uid-old", berthv1alpha1.AttachmentConfigured, 0)),
				holdings: holds("uid-old", "blue", "192.168.1.1", "p1")},
			wantRelease: []string{"blue/uid-old"}, wantAllocate: []string{"p1"}},
		{name: "an interface claimed by an older PodConfig takes nothing",
			s: snapshot{wants: map[entryKey]want{{"p1", "net1"}: {pod: p1, att: att, network: blue, conflict: "claimed"}}}},
		{name: "unwanted, pod alive: Removing, address kept, looked at again at the timeout",
			s:            snapshot{existing: existing(entry("p1", "uid-p1", berthv1alpha1.AttachmentConfigured, 0)), holdings: holds("uid-p1", "blue", "192.168.1.1", "p1")},
			wantRemoving: []string{"p1"}, wantRequeue: time.Minute},
		{name: "unwanted, pod gone: freed, no entry",
			s: snapshot{existing: existing(entry("p1", "uid-p1", berthv1alpha1.AttachmentConfigured, 0)), holdings: holds("uid-p1", "blue", "192.168.1.1", "p1"),
				gone: map[string]bool{"uid-p1": true}},
			wantRelease: []string{"blue/uid-p1"}},
		{name: "the agent reported Removed: freed",
			s:           snapshot{existing: existing(entry("p1", "uid-p1", berthv1alpha1.AttachmentRemoved, 0)), holdings: holds("uid-p1", "blue", "192.168.1.1", "p1")},
			wantRelease: []string{"blue/uid-p1"}},
		{name: "Removing within the timeout: kept, looked at again when it ends",
			s:            snapshot{existing: existing(entry("p1", "uid-p1", berthv1alpha1.AttachmentRemoving, 20*time.Second)), holdings: holds("uid-p1", "blue", "192.168.1.1", "p1")},
			wantRemoving: []string{"p1"}, wantRequeue: 40 * time.Second},
		{name: "Removing past the timeout on a live node: kept (only its agent can say the link is gone)",
			s:            snapshot{existing: existing(entry("p1", "uid-p1", berthv1alpha1.AttachmentRemoving, 2*time.Minute)), holdings: holds("uid-p1", "blue", "192.168.1.1", "p1")},
			wantRemoving: []string{"p1"}},
		{name: "Removing past the timeout on a dead node: freed and reported",
			s: snapshot{existing: existing(entry("p1", "uid-p1", berthv1alpha1.AttachmentRemoving, 2*time.Minute)), holdings: holds("uid-p1", "blue", "192.168.1.1", "p1"),
				dead: map[string]string{"n1": "node deleted"}},
			wantRelease: []string{"blue/uid-p1"}, wantTimedOut: 1},
		{name: "held without an entry, pod gone: freed",
			s:           snapshot{holdings: holds("uid-x", "blue", "192.168.1.7", "x"), gone: map[string]bool{"uid-x": true}},
			wantRelease: []string{"blue/uid-x"}},
		{name: "held without an entry, pod alive: kept (its link may exist and no agent is asked to remove it)",
			s: snapshot{holdings: holds("uid-x", "blue", "192.168.1.7", "x")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.now, s.timeout = t0, time.Minute
			p := decide(&s)
			var rel, alloc, held, removing []string
			for _, r := range p.releases {
				rel = append(rel, r.network+"/"+string(r.uid))
			}
			for _, k := range p.allocate {
				alloc = append(alloc, k.pod)
			}
			for k, a := range p.held {
				held = append(held, fmt.Sprintf("%s=%s", k.pod, a))
			}
			for _, e := range p.removing {
				removing = append(removing, e.Pod)
				if e.State != berthv1alpha1.AttachmentRemoving {
					t.Errorf("kept entry %s in state %s, want Removing", e.Pod, e.State)
				}
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"released", rel, tc.wantRelease}, {"allocated", alloc, tc.wantAllocate}, {"held", held, tc.wantHeld}, {"removing", removing, tc.wantRemoving}} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s %v, want %v", c.what, c.got, c.want)
				}
			}
			if len(p.timedOut) != tc.wantTimedOut || p.requeue != tc.wantRequeue {
				t.Errorf("timed out %v, requeue %v; want %d, %v", p.timedOut, p.requeue, tc.wantTimedOut, tc.wantRequeue)
			}
		})
	}
}

// The agent's report stands while the address is the same; a new address starts over.
func TestEntriesKeepTheAgentsReport(t *testing.T) {
	blue := podconfig.Network{Name: "blue", Bridge: "berth-blue", Prefix: netip.MustParsePrefix("192.168.1.0/24")}
	p1 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", UID: ktypes.UID("uid-p1")}, Spec: corev1.PodSpec{NodeName: "n1"}}
	k := entryKey{"p1", "net1"}
	configured := berthv1alpha1.PodAttachmentStatus{Pod: "p1", Attachment: "net1", PodUID: "uid-p1", Node: "n1", Network: "blue", Interface: "net1",
		Bridge: "berth-blue", Address: "192.168.1.5/24", HostPeer: "bp123", State: berthv1alpha1.AttachmentConfigured, LastTransitionTime: &metav1.Time{Time: t0}}
	for _, tc := range []struct {
		name      string
		addr      string
		wantState berthv1alpha1.AttachmentState
	}{
		{"same address: Configured stays", "192.168.1.5", berthv1alpha1.AttachmentConfigured},
		{"another address: Allocated again", "192.168.1.6", berthv1alpha1.AttachmentAllocated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapshot{now: t0.Add(time.Hour), wants: map[entryKey]want{k: {pod: p1, att: &berthv1alpha1.NetworkAttachment{Name: "net1", Network: "blue"}, network: blue}},
				existing: map[entryKey]berthv1alpha1.PodAttachmentStatus{k: configured}}
			entries, failures, _ := entriesOf(s, plan{held: map[entryKey]netip.Addr{k: netip.MustParseAddr(tc.addr)}}, nil)
			if len(entries) != 1 || entries[0].State != tc.wantState || len(failures) != 0 {
				t.Fatalf("entries %+v failures %v, want one in state %s", entries, failures, tc.wantState)
			}
		})
	}
}
