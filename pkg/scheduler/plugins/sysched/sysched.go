// Package sysched implements SySched, a score plugin that places pods so that each node
// exposes as few extraneous system calls (ExS, KEP-399) as possible, using seccomp profiles
// stored by the Security Profiles Operator.
package sysched

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/berth-sched/berth/pkg/scheduler/dynamicapi"
)

// Name is the plugin name used in KubeSchedulerConfiguration; it matches upstream so existing
// configurations keep working.
const Name = "SySched"

const (
	stateKey fwk.StateKey = Name
	// EventReasonProfileNotFound is the reason of the Warning event emitted on pods that
	// reference a SeccompProfile the plugin cannot find.
	EventReasonProfileNotFound = "SeccompProfileNotFound"
)

// SySched is one scheduler profile's instance of the plugin; all state hangs off it.
type SySched struct {
	handle fwk.Handle
	args   *Args
	st     *state
	memo   scoreMemo
}

var (
	_ fwk.PreFilterPlugin = &SySched{}
	_ fwk.FilterPlugin    = &SySched{}
	_ fwk.PreScorePlugin  = &SySched{}
	_ fwk.ScorePlugin     = &SySched{}
	_ fwk.ScoreExtensions = &SySched{}
	_ fwk.ReservePlugin   = &SySched{}
	// why: without SignPlugin the framework turns opportunistic batching off for the whole
	// profile, and every pod of a burst is scored on every node.
	_ fwk.SignPlugin = &SySched{}

	// New must stay usable as a registry entry.
	_ fwkruntime.PluginFactory = New
)

// New is the registry factory. It connects to the API server with the handle's kubeconfig and
// starts the SPO informers before returning; Score and Reserve only touch memory.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	dyn, disc, err := dynamicapi.Clients(Name, h)
	if err != nil {
		return nil, err
	}
	return newWithClients(ctx, args, h, dyn, disc)
}

// newWithClients is New with injectable clients, so tests can use fakes.
func newWithClients(ctx context.Context, args *Args, h fwk.Handle, dyn dynamic.Interface, disc discovery.DiscoveryInterface) (*SySched, error) {
	registerMetrics()
	logger := klog.FromContext(ctx).WithName(Name)
	pl := &SySched{handle: h, args: args, st: newState(logger, args)}
	pl.st.freed = pl.released
	if f := h.SharedInformerFactory(); f != nil {
		nodes := f.Core().V1().Nodes().Lister()
		pl.st.nodeKnown = func(name string) bool { _, err := nodes.Get(name); return err == nil }
		if err := watchPods(pl.st, f); err != nil {
			return nil, fmt.Errorf("%s: pod informer: %w", Name, err)
		}
	}
	startProfileInformers(ctx, pl.st, dyn, disc)
	return pl, nil
}

// Name returns the plugin name.
func (pl *SySched) Name() string { return Name }

// cycleData is the pod's syscall set, resolved once per cycle in PreScore.
type cycleData struct {
	ps podSet
}

// Clone shares the immutable set; nothing mutates it after PreScore.
func (c *cycleData) Clone() fwk.StateData { return c }

// PreScore resolves the incoming pod's syscall set once per cycle so Score is pure bit
// arithmetic, and reports profiles it cannot find on the pod.
func (pl *SySched) PreScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	ps := pl.podSetFor(cs, pod)
	cs.Write(stateKey, &cycleData{ps: ps})
	pl.prepareScores(cs, nodes, ps.set)
	for range ps.skipped {
		inputIssues.WithLabelValues("binding_profile_missing").Inc()
	}
	if len(ps.skipped) > 0 {
		klog.FromContext(ctx).V(2).Info("ProfileBindings skipped for the pod (their profiles do not exist)", "pod", klog.KObj(pod), "bindings", ps.skipped)
	}
	if len(ps.missing) > 0 {
		inputIssues.WithLabelValues("profile_missing").Inc()
		klog.FromContext(ctx).V(2).Info("Pod references SeccompProfiles that do not exist; counting them as the full profile",
			"pod", klog.KObj(pod), "profiles", ps.missing)
		if r := pl.handle.EventRecorder(); r != nil {
			r.Eventf(pod, nil, v1.EventTypeWarning, EventReasonProfileNotFound, "Scheduling",
				"SySched: seccomp profile(s) %s not found; counted as the full profile %s/%s",
				strings.Join(ps.missing, ", "), pl.args.DefaultProfileNamespace, pl.args.DefaultProfileName)
		}
	}
	return nil
}

func (pl *SySched) podSetFor(cs fwk.CycleState, pod *v1.Pod) podSet {
	if cs != nil {
		if d, err := cs.Read(stateKey); err == nil {
			if c, ok := d.(*cycleData); ok {
				return c.ps
			}
		}
	}
	return pl.st.podSet(pod)
}

// Score returns the raw ExS of placing pod on the node; lower is better (NormalizeScore flips).
func (pl *SySched) Score(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	if s, ok := pl.memo.Score(cs, nodeInfo); ok {
		return s, nil
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	// PreScore not enabled (or it did not prepare this node): resolve here.
	return pl.st.score(node.Name, pl.podSetFor(cs, pod).set), nil
}

// SignerName keys SySched's part of a pod's batching signature.
const SignerName = "berth.dev/" + Name + ".SyscallSet()"

// SignPod implements fwk.SignPlugin. A node's ExS depends on the pod only through its
// resolved syscall set, so the set itself is the signature (two pods whose profiles resolve to
// the same syscalls score alike, whatever the profiles are called). Reserve changes only the
// chosen node, which the framework re-scores before reusing a ranking. A pod naming a profile
// that does not exist is not signed: PreScore must run for it, to warn on the pod.
func (pl *SySched) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	ps := pl.st.podSet(pod)
	if len(ps.missing) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "pod references missing seccomp profiles")
	}
	// Trailing zero words are dropped: sets built before and after the interner grew compare equal.
	w := ps.set
	for len(w) > 0 && w[len(w)-1] == 0 {
		w = w[:len(w)-1]
	}
	return []fwk.SignFragment{{Key: SignerName, Value: []uint64(w)}}, nil
}

// ScoreExtensions returns the normalizer.
func (pl *SySched) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore maps the lowest ExS to MaxNodeScore.
func (pl *SySched) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	return helper.DefaultNormalizeScore(fwk.MaxNodeScore, true, scores)
}

// Reserve counts the pod on its node at once, so the next pod scheduled sees it even before the
// binding reaches the informer.
func (pl *SySched) Reserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	ps := pl.podSetFor(cs, pod)
	pl.st.addPod(pod, nodeName, true, &ps)
	return nil
}

// Unreserve drops an unconfirmed placement; idempotent.
func (pl *SySched) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.st.removePod(pod.UID, nodeName)
}
