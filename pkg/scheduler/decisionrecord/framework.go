package decisionrecord

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

// recordingFramework delegates everything to the profile's framework and records what the
// scheduler's cycle asks of it. Plugins run exactly once, inside the wrapped framework, and
// every optional interface (SignPlugin/batching, EnqueueExtensions, ScoreExtensions, ...)
// stays the wrapped framework's business.
type recordingFramework struct {
	framework.Framework
	r *Recorder
	p *profileRecorder
}

func (f *recordingFramework) RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string]) {
	a := f.r.begin(pod, f.p)
	state.Write(StateKey, a)
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
	a := attemptFrom(state)
	scores, st := f.Framework.RunScorePlugins(ctx, state, pod, nodes)
	if a != nil {
		if st.IsSuccess() {
			a.scores(scores)
			a.explain(ctx, state, pod, nodes, f.p.explainers)
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

// EventRecorder is what the scheduler writes the Scheduled event with after binding; with
// summary: Event the message gets the record's one-line summary. Plugins keep the wrapped
// framework's recorder (their handle).
func (f *recordingFramework) EventRecorder() events.EventRecorderLogger {
	inner := f.Framework.EventRecorder()
	if inner == nil || *f.p.args.Summary != SummaryEvent {
		return inner
	}
	return summaryRecorder{EventRecorderLogger: inner, p: f.p}
}

// MaxSummary bounds the summary so the event note stays under the Events API's 1 KiB.
const MaxSummary = 600

type summaryRecorder struct {
	events.EventRecorderLogger
	p *profileRecorder
}

func (s summaryRecorder) WithLogger(l klog.Logger) events.EventRecorderLogger {
	return summaryRecorder{EventRecorderLogger: s.EventRecorderLogger.WithLogger(l), p: s.p}
}

func (s summaryRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if pod, ok := regarding.(*v1.Pod); ok && reason == "Scheduled" {
		if rec, ok := s.p.store.getUID(pod.UID); ok && rec.Chosen != "" {
			if line := decisionapi.Summary(rec, MaxSummary); line != "" {
				msg := fmt.Sprintf(note, args...) + "; " + line
				s.EventRecorderLogger.Eventf(regarding, related, eventtype, reason, action, "%s", msg)
				return
			}
		}
	}
	s.EventRecorderLogger.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
