package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/podconfig"
	"github.com/berth-sched/berth/pkg/podconfig/ipam"
)

// A PodConfig reconcile is load (every read of the API) → decide (pure: what to free, what to
// allocate, which entries to keep) → apply (the allocator's writes) → entries and status (pure,
// from the plan and the allocator's answers) → the status write. The pure steps are where the
// rules live, and they are table-tested without an API (plan_test.go).

// snapshot is everything one decision about a PodConfig needs.
type snapshot struct {
	pc       *berthv1alpha1.PodConfig
	deleting bool
	refused  field.ErrorList
	wants    map[entryKey]want
	podCount int
	existing map[entryKey]berthv1alpha1.PodAttachmentStatus
	// holdings are the addresses pc holds, keyed by pod UID and attachment.
	holdings map[entryKey][]held
	// gone: pod UIDs, of entries or holdings no longer wanted, that the API confirms gone.
	gone map[string]bool
	// dead: nodes (of Removing entries past the removal timeout) that cannot confirm a removal,
	// with why; a node not listed is alive.
	dead    map[string]string
	now     time.Time
	timeout time.Duration
}

// release frees what the PodConfig holds for one pod UID and attachment in one network.
type release struct {
	network    string
	uid        types.UID
	attachment string
}

// plan is what a reconcile does.
type plan struct {
	releases []release
	// allocate are the wants whose address the allocator must give (it re-reads the pool).
	allocate []entryKey
	// held are the wants whose address the cache shows pc already holding in their network.
	held map[entryKey]netip.Addr
	// removing are the entries kept while agents remove links (state Removing).
	removing []berthv1alpha1.PodAttachmentStatus
	// timedOut describes entries freed without the agent's confirmation (dead nodes).
	timedOut []string
	requeue  time.Duration
}

// decide is the pure heart of a reconcile.
func decide(s *snapshot) plan {
	p := plan{held: map[entryKey]netip.Addr{}}
	freed := map[entryKey]bool{} // (uid, attachment) whose holdings are all released
	releaseAll := func(uid, attachment string) {
		k := entryKey{uid, attachment}
		if freed[k] {
			return
		}
		freed[k] = true
		for _, h := range s.holdings[k] {
			p.releases = append(p.releases, release{network: h.network, uid: types.UID(uid), attachment: attachment})
		}
	}
	inUse := map[entryKey]bool{}
	for _, k := range sortedKeys(s.wants) {
		w := s.wants[k]
		uid := string(w.pod.UID)
		inUse[entryKey{uid, w.att.Name}] = true
		if old, had := s.existing[k]; had && old.PodUID != "" && old.PodUID != uid {
			// The pod was re-created under the same name: the old one's address goes with it.
			releaseAll(old.PodUID, k.attachment)
		}
		if w.conflict != "" {
			continue
		}
		for _, h := range s.holdings[entryKey{uid, w.att.Name}] {
			if h.network == w.network.Name {
				p.held[k] = h.addr
				continue
			}
			// Held in a network the attachment no longer names.
			p.releases = append(p.releases, release{network: h.network, uid: w.pod.UID, attachment: w.att.Name})
		}
		if _, ok := p.held[k]; !ok {
			p.allocate = append(p.allocate, k)
		}
	}
	// Entries no longer wanted: the pod is gone, stopped matching, or the attachment, its
	// binding or the whole PodConfig is going.
	for _, k := range sortedKeys(s.existing) {
		if _, ok := s.wants[k]; ok {
			continue
		}
		old := s.existing[k]
		finished := s.gone[old.PodUID] || old.Address == "" || old.State == berthv1alpha1.AttachmentRemoved
		if !finished && old.State == berthv1alpha1.AttachmentRemoving && old.LastTransitionTime != nil {
			waited := s.now.Sub(old.LastTransitionTime.Time)
			if waited < s.timeout {
				p.requeue = minPositive(p.requeue, s.timeout-waited)
			} else if why, dead := s.dead[old.Node]; dead {
				finished = true
				p.timedOut = append(p.timedOut, fmt.Sprintf("%s/%s on node %s (%s)", old.Pod, old.Attachment, old.Node, why))
			}
		}
		if finished {
			releaseAll(old.PodUID, old.Attachment)
			continue
		}
		inUse[entryKey{old.PodUID, old.Attachment}] = true
		e := old
		if e.State != berthv1alpha1.AttachmentRemoving {
			e.State, e.LastError = berthv1alpha1.AttachmentRemoving, ""
			e.LastTransitionTime = &metav1.Time{Time: s.now}
			p.requeue = minPositive(p.requeue, s.timeout)
		}
		p.removing = append(p.removing, e)
	}
	// Addresses held with no entry (a status write lost to a crash between allocation and
	// status, or entries removed by hand): freed once their pod is gone. A live pod may carry
	// the link, and without an entry no agent is asked to remove it, so its address is kept
	// rather than handed out twice.
	for _, k := range sortedKeys(s.holdings) {
		if !inUse[k] && s.gone[k.pod] {
			releaseAll(k.pod, k.attachment)
		}
	}
	return p
}

// allocResult is the allocator's answer for one want.
type allocResult struct {
	addr netip.Addr
	err  error
}

// event is one Event to emit on the PodConfig.
type event struct{ reason, action, note string }

// entriesOf builds the status entries from the plan and the allocator's answers, with the
// failures to report and the Events that are new.
func entriesOf(s *snapshot, p plan, results map[entryKey]allocResult) ([]berthv1alpha1.PodAttachmentStatus, []string, []event) {
	var entries []berthv1alpha1.PodAttachmentStatus
	var failures []string
	var events []event
	for _, k := range sortedKeys(s.wants) {
		w := s.wants[k]
		old, had := s.existing[k]
		if had && old.PodUID != "" && old.PodUID != string(w.pod.UID) {
			had = false
		}
		e := berthv1alpha1.PodAttachmentStatus{
			Pod: k.pod, Attachment: k.attachment, PodUID: string(w.pod.UID), Node: w.pod.Spec.NodeName,
			Network: w.network.Name, Interface: w.att.Name, Bridge: w.network.Bridge,
		}
		res, allocated := results[k]
		if addr, ok := p.held[k]; ok {
			res, allocated = allocResult{addr: addr}, true
		}
		switch {
		case w.conflict != "":
			e.State, e.LastError = berthv1alpha1.AttachmentFailed, w.conflict
			if !had || old.LastError != e.LastError {
				events = append(events, event{EventInterfaceConflict, "Allocate", fmt.Sprintf("pod %s: %s", k.pod, w.conflict)})
			}
		case !allocated:
			continue // apply stopped before it (an error is returned): nothing to say yet
		case errors.Is(res.err, ipam.ErrExhausted):
			e.State, e.LastError = berthv1alpha1.AttachmentFailed, fmt.Sprintf("network %s exhausted", w.network)
			if !had || old.LastError != e.LastError {
				events = append(events, event{EventNetworkExhausted, "Allocate",
					fmt.Sprintf("pod %s attachment %s: network %s exhausted", k.pod, k.attachment, w.network)})
			}
		case res.err != nil:
			e.State, e.LastError = berthv1alpha1.AttachmentFailed, res.err.Error()
		default:
			e.Address = podconfig.AddressCIDR(res.addr, w.network.Prefix)
			e.State = berthv1alpha1.AttachmentAllocated
			if had && old.Address == e.Address && (old.State == berthv1alpha1.AttachmentConfigured || old.State == berthv1alpha1.AttachmentFailed) {
				e = old // the agent's report stands
			}
		}
		if e.State == berthv1alpha1.AttachmentFailed {
			failures = append(failures, fmt.Sprintf("%s/%s: %s", k.pod, k.attachment, e.LastError))
		}
		stamp(&e, old, had, s.now)
		entries = append(entries, e)
	}
	return append(entries, p.removing...), failures, events
}

// load reads everything decide needs.
func (r *Reconciler) load(ctx context.Context, pc *berthv1alpha1.PodConfig) (*snapshot, error) {
	s := &snapshot{pc: pc, deleting: !pc.DeletionTimestamp.IsZero(), now: r.now(), timeout: r.removalTimeout(),
		existing: map[entryKey]berthv1alpha1.PodAttachmentStatus{}, gone: map[string]bool{}, dead: map[string]string{}}
	var all berthv1alpha1.PodConfigList
	if err := r.Client.List(ctx, &all, client.InNamespace(pc.Namespace)); err != nil {
		return nil, err
	}
	bound, refused, err := r.bind(ctx, pc)
	if err != nil {
		return nil, err
	}
	s.refused = refused
	if s.wants, s.podCount, err = r.desired(ctx, pc, bound, all.Items, s.deleting || len(refused) > 0); err != nil {
		return nil, err
	}
	if s.holdings, err = r.holdings(ctx, pc); err != nil {
		return nil, err
	}
	for _, e := range pc.Status.Pods {
		s.existing[entryKey{e.Pod, e.Attachment}] = e
	}
	wantedUIDs := map[string]bool{}
	for _, w := range s.wants {
		wantedUIDs[string(w.pod.UID)] = true
	}
	// Is the pod of each entry or holding no longer wanted gone? Asked of the API server
	// (podGone), never concluded from the cache alone.
	check := func(name, uid string) error {
		if uid == "" || wantedUIDs[uid] {
			return nil
		}
		if _, done := s.gone[uid]; done {
			return nil
		}
		gone, err := r.podGone(ctx, pc.Namespace, name, types.UID(uid))
		s.gone[uid] = gone
		return err
	}
	for _, k := range sortedKeys(s.existing) {
		if _, ok := s.wants[k]; ok {
			continue
		}
		old := s.existing[k]
		if err := check(old.Pod, old.PodUID); err != nil {
			return nil, err
		}
		if s.gone[old.PodUID] || old.State != berthv1alpha1.AttachmentRemoving || old.LastTransitionTime == nil ||
			s.now.Sub(old.LastTransitionTime.Time) < s.timeout {
			continue
		}
		if _, done := s.dead[old.Node]; done {
			continue
		}
		dead, why, err := r.nodeDead(ctx, old.Node)
		if err != nil {
			return nil, err
		}
		if dead {
			s.dead[old.Node] = why
		}
	}
	for _, k := range sortedKeys(s.holdings) {
		for _, h := range s.holdings[k] {
			if err := check(h.podName, k.pod); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// apply frees and allocates as planned. It stops at the first error that is not an answer
// about the network (exhausted, mismatched): the reconcile is retried, and idempotent.
func (r *Reconciler) apply(ctx context.Context, s *snapshot, p plan) (map[entryKey]allocResult, error) {
	for _, rel := range p.releases {
		if err := r.Allocator.Release(ctx, rel.network, rel.uid, rel.attachment); err != nil {
			return nil, err
		}
	}
	results := map[entryKey]allocResult{}
	for _, k := range p.allocate {
		w := s.wants[k]
		addr, err := r.Allocator.Allocate(ctx, w.network, ipam.Owner{
			PodNamespace: s.pc.Namespace, PodName: w.pod.Name, PodUID: w.pod.UID, PodConfig: s.pc.Name,
			Attachment: w.att.Name, Node: w.pod.Spec.NodeName,
		})
		if err != nil && !errors.Is(err, ipam.ErrExhausted) && !errors.Is(err, ipam.ErrNetworkMismatch) {
			return results, err
		}
		results[k] = allocResult{addr: addr, err: err}
	}
	return results, nil
}
