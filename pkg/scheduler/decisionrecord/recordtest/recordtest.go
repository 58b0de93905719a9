// Package recordtest is a decision-record sink for plugins' tests: a cycle with the sink
// installed is a recording cycle, and the sink keeps what the plugins reported.
package recordtest

import (
	"sync"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/scheduler/decisionrecord"
)

// Sink collects what plugins report, for the plugins' own tests: write it into a
// CycleState with Install and the plugins see a recording cycle.
type Sink struct {
	mu sync.Mutex
	// Got is plugin → node → detail.
	Got map[string]map[string]any
}

// Clone implements fwk.StateData: clones share the sink.
func (s *Sink) Clone() fwk.StateData { return s }

// ScoreDetail implements decisionrecord.DetailSink.
func (s *Sink) ScoreDetail(plugin, node string, detail any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Got == nil {
		s.Got = map[string]map[string]any{}
	}
	if s.Got[plugin] == nil {
		s.Got[plugin] = map[string]any{}
	}
	s.Got[plugin][node] = detail
}

// ScoreLoad implements decisionrecord.DetailSink: the detail is stored as an decisionapi.LoadDetail value.
func (s *Sink) ScoreLoad(plugin, node string, detail decisionapi.LoadDetail) {
	s.ScoreDetail(plugin, node, detail)
}

// Install makes state a recording cycle that reports into s.
func (s *Sink) Install(state fwk.CycleState) { state.Write(decisionrecord.StateKey, s) }

var _ decisionrecord.DetailSink = &Sink{}
