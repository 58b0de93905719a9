// Package explain records why berth-scheduler placed (or could not place) each pod: per node
// the Filter that refused it and why, per feasible node every Score plugin's raw and
// normalised score, its weight and the total, and the chosen node. It wraps the framework of
// each profile that enables the DecisionRecord plugin (so every enabled plugin is covered,
// upstream's in-tree ones included, without running any plugin twice), keeps a bounded LRU of
// records per profile in memory, and serves them as JSON behind the scheduler's own
// authentication and authorisation. The wire types live in pkg/decisionapi.
package decisionrecord

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	fwkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Explainer is implemented by Score plugins whose inputs a record shows. After the framework
// has scored a recording cycle, the recorder asks each of the profile's explainers, for the
// nodes the record keeps only, what it read to score nodeInfo for pod: the same inputs its Score
// used (its own per-cycle state and memo), returned as a decisionapi detail, or nil. Score itself
// has one path whether the profile records or not; recording decorates it.
type Explainer interface {
	Name() string
	ExplainScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) any
}

// ExplainerFactory wraps a plugin factory so the plugins it builds that are Explainers report
// to r for their profile (the scheduler command wraps every registered factory).
func (r *Recorder) ExplainerFactory(f fwkruntime.PluginFactory) fwkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := f(ctx, obj, h)
		if err != nil {
			return nil, err
		}
		if e, ok := p.(Explainer); ok && h != nil {
			r.mu.Lock()
			if r.explainers == nil {
				r.explainers = map[string][]Explainer{}
			}
			r.explainers[h.ProfileName()] = append(r.explainers[h.ProfileName()], e)
			r.mu.Unlock()
		}
		return p, nil
	}
}

// Recorder is one scheduler instance's decision recorder: a store per recording profile.
type Recorder struct {
	started time.Time
	now     func() time.Time

	mu       sync.Mutex
	profiles map[string]*profileRecorder
	// explainers are each profile's Score plugins that explain their scores.
	explainers map[string][]Explainer
	// current is the attempt of the running scheduling cycle (cycles are sequential), sealed
	// when the next begins if its result never came.
	current *attempt
}

type profileRecorder struct {
	name    string
	args    *Args
	store   *store
	weights map[string]int
	// explainers of the profile's enabled Score plugins (set by Install).
	explainers []Explainer
}

// NewRecorder returns an empty recorder; profiles join through EnableProfile (the
// DecisionRecord plugin's factory) and are wrapped by Install.
func NewRecorder() *Recorder {
	return &Recorder{started: time.Now(), now: time.Now, profiles: map[string]*profileRecorder{}}
}

// EnableProfile implements Registrar.
func (r *Recorder) EnableProfile(profile string, args *Args) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.profiles[profile] = &profileRecorder{name: profile, args: args,
		store: newStore(int(*args.Records), int(*args.TopNodes), r.now)}
}

// Started is when this recorder (the scheduler process) started: records older than that
// do not exist.
func (r *Recorder) Started() time.Time { return r.started }

// Enabled reports whether any profile records.
func (r *Recorder) Enabled() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.profiles) > 0
}

func (r *Recorder) profile(name string) *profileRecorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.profiles[name]
}

// Len is the number of records held over all profiles.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.profiles {
		n += p.store.len()
	}
	return n
}

// ScoreWeights returns the weight the framework gives each Score plugin of a completed
// profile: the Score extension point's weight, else the MultiPoint one, and 0 counts as 1.
func ScoreWeights(p config.KubeSchedulerProfile) map[string]int {
	w := map[string]int{}
	if p.Plugins == nil {
		return w
	}
	disabled := sets.New[string]()
	for _, d := range p.Plugins.Score.Disabled {
		disabled.Insert(d.Name)
	}
	for _, list := range [][]config.Plugin{p.Plugins.Score.Enabled, p.Plugins.MultiPoint.Enabled} {
		for _, e := range list {
			if _, ok := w[e.Name]; ok {
				continue
			}
			if disabled.Has(e.Name) || disabled.Has("*") {
				// A MultiPoint plugin disabled for Score keeps no weight unless re-enabled above.
				if !containsPlugin(p.Plugins.Score.Enabled, e.Name) {
					continue
				}
			}
			w[e.Name] = int(e.Weight)
			if w[e.Name] == 0 {
				w[e.Name] = 1
			}
		}
	}
	return w
}

func containsPlugin(list []config.Plugin, name string) bool {
	for _, p := range list {
		if p.Name == name {
			return true
		}
	}
	return false
}

// Install wraps the framework of every recording profile of sched and wraps its SchedulePod
// to learn each cycle's result; with no recording profile it changes nothing. profiles are
// the completed profiles (for the weights). It must run before sched.Run.
func (r *Recorder) Install(sched *scheduler.Scheduler, profiles []config.KubeSchedulerProfile) error {
	if !r.Enabled() {
		return nil
	}
	for _, p := range profiles {
		if pr := r.profile(p.SchedulerName); pr != nil {
			r.configure(pr, p)
		}
	}
	for name, f := range sched.Profiles {
		if pr := r.profile(name); pr != nil {
			if pr.weights == nil {
				return fmt.Errorf("explain: profile %q has no configuration", name)
			}
			sched.Profiles[name] = r.Wrap(f, pr)
		}
	}
	orig := sched.SchedulePod
	sched.SchedulePod = func(ctx context.Context, f framework.Framework, state fwk.CycleState, pi *framework.QueuedPodInfo) (scheduler.ScheduleResult, error) {
		res, err := orig(ctx, f, state, pi)
		r.scheduled(ctx, f, state, pi.Pod, res, err)
		return res, err
	}
	return nil
}

// scheduled records what SchedulePod returned for the cycle's pod. A chosen node that no score
// of the cycle covers is explained here, before Reserve, like a scored cycle's nodes: its load
// without this pod.
func (r *Recorder) scheduled(ctx context.Context, f framework.Framework, state fwk.CycleState, pod *v1.Pod, res scheduler.ScheduleResult, err error) {
	a := attemptFrom(state)
	if a == nil {
		return
	}
	if res.SuggestedHost != "" {
		if pr := r.profile(f.ProfileName()); pr != nil {
			a.explainChosen(ctx, state, pod, res.SuggestedHost, f.SnapshotSharedLister(), pr.explainers)
		}
	}
	a.result(res.SuggestedHost, res.FeasibleNodes == 1, err)
}

// configure gives a recording profile its Score weights and the explainers among its Score
// plugins (a factory may have run for a plugin enabled at other extension points only).
func (r *Recorder) configure(pr *profileRecorder, p config.KubeSchedulerProfile) {
	pr.weights = ScoreWeights(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	pr.explainers = nil
	for _, e := range r.explainers[p.SchedulerName] {
		if _, ok := pr.weights[e.Name()]; ok {
			pr.explainers = append(pr.explainers, e)
		}
	}
}

// Wrap returns f with recording around the framework calls of a scheduling cycle.
func (r *Recorder) Wrap(f framework.Framework, pr *profileRecorder) framework.Framework {
	return &recordingFramework{Framework: f, r: r, p: pr}
}

// begin starts pod's attempt in profile p, sealing the one before it.
func (r *Recorder) begin(pod *v1.Pod, p *profileRecorder) *attempt {
	a := p.store.begin(pod, p.name, p.weights)
	r.mu.Lock()
	prev := r.current
	r.current = a
	r.mu.Unlock()
	if prev != nil {
		prev.seal()
		a.prev = prev.rec.Namespace + "/" + prev.rec.Name
	}
	return a
}

// StateKey is where a recording cycle keeps its attempt in the CycleState.
const StateKey fwk.StateKey = "berth.dev/explain"

func attemptFrom(state fwk.CycleState) *attempt {
	if state == nil {
		return nil
	}
	d, err := state.Read(StateKey)
	if err != nil {
		return nil
	}
	a, _ := d.(*attempt)
	return a
}
