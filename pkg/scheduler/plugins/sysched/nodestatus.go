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

type requiredIDs []string

func (r requiredIDs) Clone() fwk.StateData { return r }

// upsertNodeStatus records one node-status object.
func (s *state) upsertNodeStatus(ns *profiles.NodeStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.statusByName[ns.Name]; old != nil {
		s.forgetNodeStatusLocked(old)
	}
	s.statusByName[ns.Name] = ns
	if s.installed[ns.ProfileID] == nil {
		s.installed[ns.ProfileID] = map[string]string{}
	}
	s.installed[ns.ProfileID][ns.Node] = ns.State
}

func (s *state) deleteNodeStatus(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.statusByName[name]; old != nil {
		s.forgetNodeStatusLocked(old)
		delete(s.statusByName, name)
	}
}

func (s *state) forgetNodeStatusLocked(ns *profiles.NodeStatus) {
	if m := s.installed[ns.ProfileID]; m != nil {
		delete(m, ns.Node)
		if len(m) == 0 {
			delete(s.installed, ns.ProfileID)
		}
	}
}

// requiredIDs are the IDs of the existing profiles pod references (directly or through a
// binding) that SPO reports node states for.
func (s *state) requiredIDs(ps podSet) requiredIDs {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out requiredIDs
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
	ps := pl.st.podSet(pod)
	cs.Write(stateKey, &cycleData{ps: ps})
	ids := pl.st.requiredIDs(ps)
	if len(ids) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	cs.Write(installedKey, ids)
	return nil, nil
}

// PreFilterExtensions: none (adding or removing pods does not change what is installed).
func (pl *SySched) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter refuses a node where a profile the pod needs is not installed.
func (pl *SySched) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, node fwk.NodeInfo) *fwk.Status {
	d, err := cs.Read(installedKey)
	if err != nil {
		return nil
	}
	for _, id := range d.(requiredIDs) {
		if why := pl.st.notInstalled(id, node.Node().Name); why != "" {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
		}
	}
	return nil
}
