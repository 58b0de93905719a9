package berthctl

import (
	"reflect"
	"testing"

	"github.com/paypal/load-watcher/pkg/watcher"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// TestWatcherFreshness: a node counts as fresh only when the watcher updated it, does not call
// it stale, and still serves its metrics.
func TestWatcherFreshness(t *testing.T) {
	doc := &loadapi.Response{Nodes: map[string]loadapi.NodeStatus{
		"fresh": {Updated: 10}, "stale": {Updated: 10, Stale: true}, "unmeasured": {Updated: 10}, "never": {},
	}}
	doc.Data.NodeMetricsMap = watcher.NodeMetricsMap{"fresh": {}, "stale": {}, "never": {}}
	for _, tc := range []struct {
		name                  string
		nodes                 []string
		fresh, stale, missing []string
	}{
		{name: "each kind", nodes: []string{"fresh", "stale", "unmeasured", "never", "unknown"},
			fresh: []string{"fresh"}, stale: []string{"stale", "unmeasured"}, missing: []string{"never", "unknown"}},
		{name: "no nodes"},
		{name: "only unknown", nodes: []string{"a", "b"}, missing: []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh, stale, missing := watcherFreshness(doc, tc.nodes)
			if !reflect.DeepEqual(fresh, tc.fresh) || !reflect.DeepEqual(stale, tc.stale) || !reflect.DeepEqual(missing, tc.missing) {
				t.Errorf("got fresh %v stale %v missing %v, want %v %v %v", fresh, stale, missing, tc.fresh, tc.stale, tc.missing)
			}
		})
	}
}
