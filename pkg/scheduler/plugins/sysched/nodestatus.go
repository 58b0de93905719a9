package sysched

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/profiles"
)

// Profiles not installed on a node. SPO installs each profile on every node its daemon runs on
// and reports the result per node in a SecurityProfileNodeStatus; a container whose Localhost
// profile is not installed on its node fails to start there. SySched's Filter refuses such
// nodes, from the informer's copy of those objects (no API call in Filter). It only ever acts
// on profiles SPO reports for at least one node: a cluster (or a profile) without node-status
// objects is not filtered, because an optional signal must not stop pods from being scheduled.

// installedKey is the cycle-state key of the profile IDs a pod needs installed.
const installedKey fwk.StateKey = Name + "/installed"

// upsertNodeStatus records one node-status object.
func (s *state) upsertNodeStatus(ns *profiles.NodeStatus) {
	s.tellFreed(func() (freed []string) {
		prev, had := s.installed[ns.ProfileID][ns.Node]
		if old := s.statusByName[ns.Name]; old != nil {
			if s.forgetNodeStatusLocked(old) && old.ProfileID != ns.ProfileID {
				freed = append(freed, old.ProfileID)
			}
		}
		s.statusByName[ns.Name] = ns
		if s.installed[ns.ProfileID] == nil {
			s.installed[ns.ProfileID] = map[string]string{}
		}
		s.installed[ns.ProfileID][ns.Node] = ns.State
		if ns.State == profiles.StateInstalled && (!had || prev != profiles.StateInstalled) {
			freed = append(freed, ns.ProfileID)
		}
		return freed
	})
}

func (s *state) deleteNodeStatus(name string) {
	s.tellFreed(func() (freed []string) {
		if old := s.statusByName[name]; old != nil {
			if s.forgetNodeStatusLocked(old) {
				freed = append(freed, old.ProfileID)
			}
			delete(s.statusByName, name)
		}
		return freed
	})
}

// tellFreed runs change under the lock and tells freed, after it, the profile IDs the change
// may let waiting pods use: one now Installed on a node, or one SPO reports on no node any more
// (no longer filtered).
func (s *state) tellFreed(change func() []string) {
	s.mu.Lock()
	freed := change()
	s.mu.Unlock()
	if len(freed) > 0 && s.freed != nil {
		s.freed(freed)
	}
}

// forgetNodeStatusLocked drops one object's state and says whether its profile ID is now
// reported on no node.
func (s *state) forgetNodeStatusLocked(ns *profiles.NodeStatus) bool {
	m := s.installed[ns.ProfileID]
	if m == nil {
		return false
	}
	delete(m, ns.Node)
	if len(m) == 0 {
		delete(s.installed, ns.ProfileID)
		return true
	}
	return false
}

// requiredIDs are the IDs of the existing profiles pod references (directly or through a
// binding) that SPO reports node states for.
func (s *state) requiredIDs(ps podSet) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	seen := map[string]bool{}
	for _, k := range ps.used {
		e := s.profiles[k]
		if e == nil || seen[e.p.ID] || s.installed[e.p.ID] == nil {
			continue
		}
		seen[e.p.ID] = true
		out = append(out, e.p.ID)
	}
	return out
}

// notInstalled says why profile id cannot be used on node, or "" if it can.
func (s *state) notInstalled(id, node string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	nodes := s.installed[id]
	if nodes == nil {
		return ""
	}
	st, ok := nodes[node]
	switch {
	case !ok:
		return fmt.Sprintf("seccomp profile %s is not installed on node %s (SPO reports it on %d other nodes, none for this one)", id, node, len(nodes))
	case st != profiles.StateInstalled:
		return fmt.Sprintf("seccomp profile %s is %s on node %s, not Installed (SecurityProfileNodeStatus)", id, st, node)
	}
	return ""
}

// PreFilter works out which profiles the pod needs installed; with none that SPO reports on,
// the Filter is skipped for the pod.
func (pl *SySched) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !filterNotInstalled(pl.args) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	// The set is kept in the cycle state: PreScore reads it from there rather than resolving
	// the pod's profiles a second time.
	// why before any read of the install states: see noteRefused.
	gen := pl.st.waiting.gen.Load()
	ps := pl.st.podSet(pod)
	cs.Write(stateKey, &cycleData{ps: ps})
	ids := pl.st.requiredIDs(ps)
	if len(ids) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	cs.Write(installedKey, &required{ids: ids, gen: gen})
	return nil, nil
}

// PreFilterExtensions: none (adding or removing pods does not change what is installed).
func (pl *SySched) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter refuses a node where a profile the pod needs is not installed.
func (pl *SySched) Filter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, node fwk.NodeInfo) *fwk.Status {
	d, err := cs.Read(installedKey)
	if err != nil {
		return nil
	}
	req := d.(*required)
	for _, id := range req.ids {
		if why := pl.st.notInstalled(id, node.Node().Name); why != "" {
			pl.noteRefused(req, pod)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
		}
	}
	return nil
}
