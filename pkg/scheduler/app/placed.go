package app

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/berth-sched/berth/pkg/placedload"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware"
)

// placedRegistry serves placedload.Path: the load each load-aware plugin of each profile adds
// to nodes for pods it placed that their reports do not include yet. It is filled as the
// framework builds the plugins (one registry per scheduler command, no package state).
type placedRegistry struct {
	mu      sync.Mutex
	engines []placedEngine
}

type placedEngine struct {
	profile, plugin string
	engine          *loadaware.Engine
}

// engineOwner is a load-aware plugin (TargetLoadPacking, LoadVariationRiskBalancing).
type engineOwner interface{ Engine() *loadaware.Engine }

// wrap records the engine of every plugin f builds that has one.
func (r *placedRegistry) wrap(name string, f frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := f(ctx, obj, h)
		if err != nil {
			return p, err
		}
		if o, ok := p.(engineOwner); ok && o.Engine() != nil {
			r.mu.Lock()
			r.engines = append(r.engines, placedEngine{profile: h.ProfileName(), plugin: name, engine: o.Engine()})
			r.mu.Unlock()
		}
		return p, nil
	}
}

// ServeHTTP answers placedload.Path with every engine's unreported placed load.
func (r *placedRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	r.mu.Lock()
	engines := append([]placedEngine(nil), r.engines...)
	r.mu.Unlock()
	ans := placedload.Answer{Profiles: []placedload.Profile{}}
	for _, e := range engines {
		p := placedload.Profile{Profile: e.profile, Plugin: e.plugin, Nodes: map[string]placedload.Load{}}
		for node, est := range e.engine.Unreported() {
			p.Nodes[node] = placedload.Load{MilliCPU: est.MilliCPU, MemoryBytes: est.MemoryBytes, Pods: est.Pods,
				FromProfile: est.FromProfile, FromNamespace: est.FromNamespace}
		}
		ans.Profiles = append(ans.Profiles, p)
	}
	sort.Slice(ans.Profiles, func(i, j int) bool {
		if ans.Profiles[i].Profile != ans.Profiles[j].Profile {
			return ans.Profiles[i].Profile < ans.Profiles[j].Profile
		}
		return ans.Profiles[i].Plugin < ans.Profiles[j].Plugin
	})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}
