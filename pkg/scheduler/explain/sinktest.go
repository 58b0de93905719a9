package explain

import (
	"sync"

	fwk "k8s.io/kube-scheduler/framework"

	api "github.com/berth-sched/berth/pkg/explain"
)

// TestSink collects what plugins report, for the plugins' own tests: write it into a
// CycleState with Install and the plugins see a recording cycle.
type TestSink struct {
	mu sync.Mutex
	// Got is plugin → node → detail.
	Got map[string]map[string]any
}

// Clone implements fwk.StateData: clones share the sink.
func (s *TestSink) Clone() fwk.StateData { return s }

// ScoreDetail implements DetailSink.
func (s *TestSink) ScoreDetail(plugin, node string, detail any) {
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

// ScoreLoad implements DetailSink: the detail is stored as an api.LoadDetail value.
func (s *TestSink) ScoreLoad(plugin, node string, detail api.LoadDetail) {
	s.ScoreDetail(plugin, node, detail)
}

// Install makes state a recording cycle that reports into s.
func (s *TestSink) Install(state fwk.CycleState) { state.Write(StateKey, s) }
