package explain

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

// Explainer is the optional interface a Score plugin implements to attach the inputs of its
// score (e.g. the utilisation it read) to a record. The recorder calls it only for the nodes
// it keeps, after scoring, so Score itself stays allocation-free; it must read caches only.
type Explainer interface {
	ExplainScore(pod *v1.Pod, nodeName string) any
}

// Recorder is one scheduler instance's decision recorder.
type Recorder struct {
	opts    Options
	store   *store
	started time.Time

	mu         sync.Mutex
	explainers map[string]map[string]Explainer // profile → plugin → instance
	profiles   map[string]map[string]int       // profile → score weights
}

// NewRecorder validates opts and returns a recorder, or nil when recording is off.
func NewRecorder(opts Options) (*Recorder, error) {
	if errs := opts.Validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if !opts.Enabled() {
		return nil, nil
	}
	now := time.Now
	return &Recorder{
		opts:       opts,
		store:      newStore(opts.Records, opts.TopNodes, now),
		started:    now(),
		explainers: map[string]map[string]Explainer{},
		profiles:   map[string]map[string]int{},
	}, nil
}

// Started is when this recorder (the scheduler process) started: records older than that
// do not exist.
func (r *Recorder) Started() time.Time { return r.started }

// Len is the number of records held.
func (r *Recorder) Len() int { return r.store.len() }

// Get returns the record of a pod, or when it was evicted from the LRU.
func (r *Recorder) Get(ns, name string) (Record, bool, time.Time) { return r.store.get(ns, name) }

// WrapFactory returns factory unchanged in behaviour; it only remembers, per profile, plugin
// instances that implement Explainer. The plugin itself is not wrapped.
func (r *Recorder) WrapFactory(name string, factory fwkruntime.PluginFactory) fwkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := factory(ctx, args, h)
		if err != nil {
			return p, err
		}
		if ex, ok := p.(Explainer); ok {
			r.mu.Lock()
			m := r.explainers[h.ProfileName()]
			if m == nil {
				m = map[string]Explainer{}
				r.explainers[h.ProfileName()] = m
			}
			m[name] = ex
			r.mu.Unlock()
		}
		return p, nil
	}
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

// Install wraps every profile's framework of sched with the recorder and wraps its
// SchedulePod to learn each cycle's result. profiles are the completed profiles (for the
// weights). It must run before sched.Run.
func (r *Recorder) Install(sched *scheduler.Scheduler, profiles []config.KubeSchedulerProfile) error {
	for _, p := range profiles {
		r.profiles[p.SchedulerName] = ScoreWeights(p)
	}
	for name, f := range sched.Profiles {
		w, ok := r.profiles[name]
		if !ok {
			return fmt.Errorf("explain: profile %q has no configuration", name)
		}
		sched.Profiles[name] = r.Wrap(f, w)
	}
	orig := sched.SchedulePod
	sched.SchedulePod = func(ctx context.Context, f framework.Framework, state fwk.CycleState, pi *framework.QueuedPodInfo) (scheduler.ScheduleResult, error) {
		res, err := orig(ctx, f, state, pi)
		if a := attemptFrom(state); a != nil {
			a.result(res.SuggestedHost, res.FeasibleNodes == 1, err)
		}
		return res, err
	}
	return nil
}

// Wrap returns f with recording around the framework calls of a scheduling cycle. weights
// are the profile's Score weights.
func (r *Recorder) Wrap(f framework.Framework, weights map[string]int) framework.Framework {
	r.mu.Lock()
	ex := r.explainers[f.ProfileName()]
	r.mu.Unlock()
	return &recordingFramework{Framework: f, r: r, weights: weights, explainers: ex}
}

const stateKey fwk.StateKey = "berth.dev/explain"

func attemptFrom(state fwk.CycleState) *attempt {
	if state == nil {
		return nil
	}
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	a, _ := d.(*attempt)
	return a
}

// recordingFramework delegates everything to the profile's framework and records what the
// scheduler's cycle asks of it. Plugins run exactly once, inside the wrapped framework.
type recordingFramework struct {
	framework.Framework
	r          *Recorder
	weights    map[string]int
	explainers map[string]Explainer
}

func (f *recordingFramework) RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string]) {
	a := f.r.store.begin(pod, f.ProfileName(), f.weights, f.explainers)
	state.Write(stateKey, a)
	res, st, plugins := f.Framework.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() {
		if st.IsRejected() {
			a.preFilter(st)
		} else {
			a.fail(st)
		}
	}
	return res, st, plugins
}

func (f *recordingFramework) GetNodeHint(ctx context.Context, pod *v1.Pod, sig fwk.PodSignature, state fwk.CycleState, cycle int64) string {
	h := f.Framework.GetNodeHint(ctx, pod, sig, state, cycle)
	if h != "" {
		if a := attemptFrom(state); a != nil {
			a.hint(h)
		}
	}
	return h
}

func (f *recordingFramework) RunFilterPluginsWithNominatedPods(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	st := f.Framework.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
	if a := attemptFrom(state); a != nil {
		a.filter(ni.Node().Name, st)
	}
	return st
}

func (f *recordingFramework) RunScorePlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) ([]fwk.NodePluginScores, *fwk.Status) {
	scores, st := f.Framework.RunScorePlugins(ctx, state, pod, nodes)
	if a := attemptFrom(state); a != nil {
		if st.IsSuccess() {
			a.scores(pod, scores)
		} else {
			a.fail(st)
		}
	}
	return scores, st
}

func (f *recordingFramework) RunPostFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	res, st := f.Framework.RunPostFilterPlugins(ctx, state, pod, m)
	if a := attemptFrom(state); a != nil {
		msg := st.Message()
		if res != nil && res.NominatingInfo != nil && res.NominatedNodeName != "" {
			msg = fmt.Sprintf("nominated %s (preemption): %s", res.NominatedNodeName, msg)
		}
		a.postFilter(msg)
	}
	return res, st
}

func (f *recordingFramework) RunReservePluginsReserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	st := f.Framework.RunReservePluginsReserve(ctx, state, pod, node)
	if !st.IsSuccess() {
		if a := attemptFrom(state); a != nil {
			a.reserveFailed(st)
		}
	}
	return st
}
