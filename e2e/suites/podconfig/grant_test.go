package podconfig

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/framework"
)

// onePodConfig is a PodConfig of pods a and b (label podconfig=cnf) with one attachment.
func onePodConfig(name, att, network string) *berthv1alpha1.PodConfig {
	return &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: berthv1alpha1.PodConfigSpec{
			PodSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{berthv1alpha1.PodConfigLabel: pcName}},
			NetworkAttachments: []berthv1alpha1.NetworkAttachment{{Name: att, Network: network}}}}
}

// waitPC waits until ok holds for PodConfig name and returns it.
func (e *env) waitPC(t *testing.T, name, what string, ok func(*berthv1alpha1.PodConfig) bool) *berthv1alpha1.PodConfig {
	t.Helper()
	return framework.WaitPodConfig(e.ctx, t, e.cl, ns, name, what, 60*time.Second, ok)
}

func allIn(state berthv1alpha1.AttachmentState, n int) func(*berthv1alpha1.PodConfig) bool {
	return func(pc *berthv1alpha1.PodConfig) bool {
		if len(pc.Status.Pods) != n {
			return false
		}
		for _, en := range pc.Status.Pods {
			if en.State != state {
				return false
			}
		}
		return true
	}
}

// refusedNaming holds when the PodConfig's current generation is refused (Degraded, phase
// Failed) with a message containing msg and it has no entry left.
func refusedNaming(msg string) func(*berthv1alpha1.PodConfig) bool {
	return func(pc *berthv1alpha1.PodConfig) bool {
		c := meta.FindStatusCondition(pc.Status.Conditions, berthv1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "InvalidSpec" && c.ObservedGeneration == pc.Generation &&
			strings.Contains(c.Message, msg) && pc.Status.Phase == berthv1alpha1.PodConfigFailed && len(pc.Status.Pods) == 0
	}
}

// linkExists reports whether the node has a link of that name.
func (e *env) linkExists(name string) bool {
	_, err := e.rn.InNetNS(e.ctx, "ip", "-o", "link", "show", "dev", name)
	return err == nil
}

// podHas reports whether pod has an interface of that name (asked of netecho in the pod).
func (e *env) podHas(t *testing.T, pod, iface string) bool {
	t.Helper()
	ifs, err := framework.NetechoInterfaces(e.ctx, e.rn, e.pod(t, pod).Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	_, ok := ifs[iface]
	return ok
}

// waitNodeState waits until the node's links and addresses are back to before.
func (e *env) waitNodeState(t *testing.T, before []string) {
	t.Helper()
	var after []string
	var stateErr error
	err := wait.PollUntilContextTimeout(e.ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		after, stateErr = framework.NodeNetState(ctx, e.rn)
		return stateErr == nil && slices.Equal(after, before), nil
	})
	if err != nil {
		t.Errorf("the node's links and addresses differ from before (%v):\nbefore:\n%s\nafter:\n%s",
			stateErr, strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
}

// createPC creates pc and, when t ends, deletes it and waits until it is gone.
func (e *env) createPC(t *testing.T, pc *berthv1alpha1.PodConfig) {
	t.Helper()
	framework.CreatePodConfig(e.ctx, t, e.cl, pc.DeepCopy(), 60*time.Second)
}

// createNetwork creates an accepted PodNetwork and, when t ends, deletes it and waits until it
// and its pool are gone.
func (e *env) createNetwork(t *testing.T, pn *berthv1alpha1.PodNetwork) {
	t.Helper()
	_, err := framework.CreatePodNetwork(e.ctx, e.cl, pn, 30*time.Second)
	t.Cleanup(func() {
		if err := framework.DeletePodNetwork(context.Background(), e.cl, pn.Name, 60*time.Second); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stateRecorder records every state each entry of one PodConfig passes through, from a watch
// (a poll could miss a state that lasts milliseconds).
type stateRecorder struct {
	mu   sync.Mutex
	seen map[string][]berthv1alpha1.AttachmentState // pod/attachment → states in order
}

func (e *env) recordStates(t *testing.T, name string) (*stateRecorder, func()) {
	t.Helper()
	w, err := e.cl.Watch(e.ctx, &berthv1alpha1.PodConfigList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	r := &stateRecorder{seen: map[string][]berthv1alpha1.AttachmentState{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pc, ok := ev.Object.(*berthv1alpha1.PodConfig)
			if !ok {
				continue
			}
			r.mu.Lock()
			for _, en := range pc.Status.Pods {
				k := en.Pod + "/" + en.Attachment
				if s := r.seen[k]; len(s) == 0 || s[len(s)-1] != en.State {
					r.seen[k] = append(s, en.State)
				}
			}
			r.mu.Unlock()
		}
	}()
	return r, func() { w.Stop(); <-done }
}

func (r *stateRecorder) states() map[string][]berthv1alpha1.AttachmentState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]berthv1alpha1.AttachmentState{}
	for k, v := range r.seen {
		out[k] = slices.Clone(v)
	}
	return out
}

// testRevokeGrant: a network granted to namespaces labelled berth-e2e-grant=rv; PodConfig
// revoke attaches pods a and b to it. Relabelling the namespace revokes the grant: the
// PodConfig is refused naming spec.networkAttachments[0].network, each entry passes through
// Removing, the agent removes both host peers and the bridge it made, the pods lose the
// interface, the addresses are freed, and the node is as it was.
func (e *env) testRevokeGrant(t *testing.T) {
	const grantKey, grantValue, network, bridge, name, att = "berth-e2e-grant", "rv", "e2e-rv", "berth-e2erv", "revoke", "rv1"
	relabel := func(value *string) error {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, grantKey)
		if value != nil {
			patch = fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, grantKey, *value)
		}
		return e.cl.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	before, err := framework.NodeNetState(e.ctx, e.rn)
	if err != nil {
		t.Fatal(err)
	}
	v := grantValue
	if err := relabel(&v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := relabel(nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	e.createNetwork(t, framework.NewPodNetwork(network, bridge, "192.168.152.0/24", "192.168.152.1", map[string]string{grantKey: grantValue}))
	e.createPC(t, onePodConfig(name, att, network))
	pc := e.waitPC(t, name, "both entries Configured", allIn(berthv1alpha1.AttachmentConfigured, 2))
	var peers []string
	for _, en := range pc.Status.Pods {
		peers = append(peers, en.HostPeer)
	}
	for _, p := range []string{"a", "b"} {
		if !e.podHas(t, p, att) {
			t.Fatalf("pod %s has no %s although its entry is Configured", p, att)
		}
	}
	if !e.linkExists(bridge) {
		t.Fatalf("no bridge %s although both entries are Configured", bridge)
	}

	rec, stop := e.recordStates(t, name)
	defer stop()
	if err := relabel(nil); err != nil {
		t.Fatal(err)
	}
	e.waitPC(t, name, "refused naming the network, no entry left",
		refusedNaming("spec.networkAttachments[0].network: Forbidden: PodNetwork e2e-rv does not grant namespace cnf"))
	stop()
	t.Logf("states each entry went through: %v", rec.states())
	for k, states := range rec.states() {
		if !slices.Contains(states, berthv1alpha1.AttachmentRemoving) {
			t.Errorf("entry %s went %v, never Removing", k, states)
		}
	}
	if got := len(rec.states()); got != 2 {
		t.Errorf("the watch saw %d entries, want 2: %v", got, rec.states())
	}
	for _, p := range peers {
		if e.linkExists(p) {
			t.Errorf("host peer %s still on the node after the grant was revoked", p)
		}
	}
	for _, p := range []string{"a", "b"} {
		if e.podHas(t, p, att) {
			t.Errorf("pod %s still has %s after the grant was revoked", p, att)
		}
	}
	if n := len(e.allocationsOf(t, network)); n != 0 {
		t.Errorf("%d addresses of %s still allocated after the grant was revoked", n, network)
	}
	e.waitNodeState(t, before) // the bridge went with its last port
}

// allocationsOf is the pool of network (empty when it has none).
func (e *env) allocationsOf(t *testing.T, network string) []berthv1alpha1.Allocation {
	t.Helper()
	al := &berthv1alpha1.IPAllocation{}
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: network}, al); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return al.Spec.Allocations
}

// testDeleteNetwork: PodConfig doomed attaches pods a and b to network e2e-dm. With the agent
// stopped (so the links stay while we look), deleting the network leaves it held by its
// finalizer, saying it waits for 2 attachments, the PodConfig refused (the network is being
// deleted) with both entries Removing, and the links and addresses in place. Once the agent
// is back it removes the links, the addresses are freed, the pool and then the network go,
// and the node is as it was.
func (e *env) testDeleteNetwork(t *testing.T) {
	const network, bridge, name, att = "e2e-dm", "berth-e2edm", "doomed", "dm1"
	before, err := framework.NodeNetState(e.ctx, e.rn)
	if err != nil {
		t.Fatal(err)
	}
	e.createNetwork(t, framework.NewPodNetwork(network, bridge, "192.168.153.0/24", "192.168.153.1", grant()))
	e.createPC(t, onePodConfig(name, att, network))
	pc := e.waitPC(t, name, "both entries Configured", allIn(berthv1alpha1.AttachmentConfigured, 2))
	var peers []string
	for _, en := range pc.Status.Pods {
		peers = append(peers, en.HostPeer)
	}

	// why stop the agent: it removes links within milliseconds; stopped, the network must be
	// seen waiting for them.
	e.c.StopComponent(e.agent)
	defer func() {
		// A failure below must not leave the later tests without an agent.
		if exited, _ := e.agent.Exited(); exited {
			if e.agent, err = e.startAgent("berth-agent-netdel-restore"); err != nil {
				t.Errorf("restarting the agent: %v", err)
			}
		}
	}()
	if err := e.cl.Delete(e.ctx, &berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: network}}); err != nil {
		t.Fatal(err)
	}
	e.waitPC(t, name, "refused (network being deleted), both entries Removing", func(pc *berthv1alpha1.PodConfig) bool {
		c := meta.FindStatusCondition(pc.Status.Conditions, berthv1alpha1.ConditionDegraded)
		return allIn(berthv1alpha1.AttachmentRemoving, 2)(pc) && c != nil && c.Status == metav1.ConditionTrue &&
			strings.Contains(c.Message, "spec.networkAttachments[0].network") && strings.Contains(c.Message, "being deleted")
	})
	held := func() {
		t.Helper()
		pn := &berthv1alpha1.PodNetwork{}
		if err := e.cl.Get(e.ctx, client.ObjectKey{Name: network}, pn); err != nil {
			t.Fatalf("PodNetwork gone while its links exist: %v", err)
		}
		ready := meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionReady)
		if pn.DeletionTimestamp.IsZero() || !slices.Contains(pn.Finalizers, berthv1alpha1.PodNetworkFinalizer) ||
			ready == nil || ready.Reason != "Deleting" || !strings.Contains(ready.Message, "waiting for 2 attachments") {
			t.Fatalf("PodNetwork %s: deleted %v, finalizers %v, Ready %+v; want held, waiting for 2 attachments", network, pn.DeletionTimestamp, pn.Finalizers, ready)
		}
		if n := len(e.allocationsOf(t, network)); n != 2 {
			t.Fatalf("%d addresses of %s allocated while its links exist, want 2", n, network)
		}
		for _, p := range peers {
			if !e.linkExists(p) {
				t.Fatalf("host peer %s gone with the agent stopped", p)
			}
		}
	}
	err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pn := &berthv1alpha1.PodNetwork{}
		if err := e.cl.Get(ctx, client.ObjectKey{Name: network}, pn); err != nil {
			return false, nil
		}
		r := meta.FindStatusCondition(pn.Status.Conditions, berthv1alpha1.ConditionReady)
		return r != nil && r.Reason == "Deleting", nil
	})
	if err != nil {
		t.Fatalf("the deleted PodNetwork never said it was waiting: %v", err)
	}
	held()
	// why wait: holding must not be a moment in a race; nothing may let go while the links exist.
	time.Sleep(3 * time.Second)
	held()

	if e.agent, err = e.startAgent("berth-agent-netdel"); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(e.cl.Get(ctx, client.ObjectKey{Name: network}, &berthv1alpha1.PodNetwork{})) &&
			apierrors.IsNotFound(e.cl.Get(ctx, client.ObjectKey{Name: network}, &berthv1alpha1.IPAllocation{})), nil
	})
	if err != nil {
		t.Fatalf("PodNetwork %s or its IPAllocation not gone after the agent came back: %v", network, err)
	}
	e.waitPC(t, name, "refused: the network no longer exists", refusedNaming("no PodNetwork of that name"))
	for _, p := range peers {
		if e.linkExists(p) {
			t.Errorf("host peer %s left on the node", p)
		}
	}
	for _, p := range []string{"a", "b"} {
		if e.podHas(t, p, att) {
			t.Errorf("pod %s still has %s after its network was deleted", p, att)
		}
	}
	e.waitNodeState(t, before)
}
