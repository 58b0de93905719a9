package classrule

import (
	"sync"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// Grants is what the rule knows of the InstanceClasses: per class value, the namespaces
// sharing it. Without a grant a class value belongs to the namespace of each pod carrying it,
// so a pod's effective class is "<namespace>/<value>" (two namespaces using one value are two
// classes); a pod of a namespace an InstanceClass lists has the shared class "<value>
// (shared)". Both forms are what refusals and decision records show. A namespace cannot
// contain "/" and a label value neither "/" nor " ", so the forms never collide.
//
// Grants never weakens isolation while it is incomplete (before its informer has synced, or
// with the CRD missing): every class is then its namespace's, which only keeps more pods apart.
type Grants struct {
	mu   sync.RWMutex
	m    map[string]*grant
	subs []func(value string)
	// synced reports whether the informer feeding the grants has listed them (nil: none runs).
	synced func() bool
}

type grant struct {
	ns  map[string]struct{}
	key string
}

// NewGrants returns an empty set of grants.
func NewGrants() *Grants { return &Grants{m: map[string]*grant{}} }

// HasSynced is false while an informer feeding g has not listed the InstanceClasses yet.
func (g *Grants) HasSynced() bool {
	if g == nil {
		return true
	}
	g.mu.RLock()
	f := g.synced
	g.mu.RUnlock()
	return f == nil || f()
}

// SetSynced records how to tell that the informer feeding g has listed the InstanceClasses.
func (g *Grants) SetSynced(f func() bool) {
	g.mu.Lock()
	g.synced = f
	g.mu.Unlock()
}

// Set records that class value is shared by namespaces (none: the InstanceClass is gone) and
// tells subscribers, which re-key the pods carrying that value.
func (g *Grants) Set(value string, namespaces []string) {
	g.mu.Lock()
	if len(namespaces) == 0 {
		delete(g.m, value)
	} else {
		gr := &grant{ns: make(map[string]struct{}, len(namespaces)), key: classmarker.SharedClass(value)}
		for _, n := range namespaces {
			gr.ns[n] = struct{}{}
		}
		g.m[value] = gr
	}
	subs := append([]func(string){}, g.subs...)
	g.mu.Unlock()
	for _, f := range subs {
		f(value)
	}
}

// Subscribe calls f with the class value of every later change.
func (g *Grants) Subscribe(f func(value string)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.subs = append(g.subs, f)
}

// Effective is the effective class of value carried by a pod of namespace ns.
func (g *Grants) Effective(ns, value string) string {
	if g != nil {
		g.mu.RLock()
		gr := g.m[value]
		g.mu.RUnlock()
		if gr != nil {
			if _, ok := gr.ns[ns]; ok {
				return gr.key
			}
		}
	}
	return classmarker.NamespaceClass(ns, value)
}
