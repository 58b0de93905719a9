package instanceisolation

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/scheduler/dynamicapi"
)

// ClassGVR is the InstanceClass resource: the administrator's grant of one class value to a
// list of namespaces (README.md, "Classes belong to namespaces").
var ClassGVR = berthv1alpha1.GroupVersion.WithResource("instanceclasses")

// Grants is what the plugin knows of the InstanceClasses: per class value, the namespaces
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

// hasSynced is false while an informer feeding g has not listed the InstanceClasses yet.
func (g *Grants) hasSynced() bool {
	if g == nil {
		return true
	}
	g.mu.RLock()
	f := g.synced
	g.mu.RUnlock()
	return f == nil || f()
}

type grant struct {
	ns  map[string]struct{}
	key string
}

// NewGrants returns an empty set of grants.
func NewGrants() *Grants { return &Grants{m: map[string]*grant{}} }

// Set records that class value is shared by namespaces (none: the InstanceClass is gone) and
// tells subscribers, which re-key the pods carrying that value.
func (g *Grants) Set(value string, namespaces []string) {
	g.mu.Lock()
	if len(namespaces) == 0 {
		delete(g.m, value)
	} else {
		gr := &grant{ns: make(map[string]struct{}, len(namespaces)), key: SharedClass(value)}
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

// subscribe calls f with the class value of every later change.
func (g *Grants) subscribe(f func(value string)) {
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
	return NamespaceClass(ns, value)
}

// NamespaceClass is the effective class of value owned by namespace ns alone (the contract
// package's rule, which the webhook and the marker's writer share).
func NamespaceClass(ns, value string) string { return classmarker.NamespaceClass(ns, value) }

// SharedClass is the effective class of value shared through an InstanceClass.
func SharedClass(value string) string { return classmarker.SharedClass(value) }

// watchClasses feeds g from an InstanceClass informer on h's kubeconfig, started once the API
// serves the resource (the plugin must not keep the scheduler from starting when the CRD
// arrives later). Without a kubeconfig (tests) g stays empty.
func watchClasses(ctx context.Context, h fwk.Handle, g *Grants, logger klog.Logger) error {
	if h == nil || h.KubeConfig() == nil {
		return nil
	}
	dyn, disc, err := dynamicapi.Clients(Name, h)
	if err != nil {
		return err
	}
	dynamicapi.StartWhenServed(ctx, dynamicapi.RetryEvery, func(first bool) bool {
		ok, err := servesClasses(disc)
		if err != nil || !ok {
			if first {
				logger.Info("InstanceClass API not served yet; every class belongs to its pods' namespace until it is", "err", err)
			}
			return false
		}
		f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
		inf := f.ForResource(ClassGVR).Informer()
		set := func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				ns, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "namespaces")
				g.Set(u.GetName(), ns)
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    set,
			UpdateFunc: func(_, obj any) { set(obj) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				if u, ok := obj.(*unstructured.Unstructured); ok {
					g.Set(u.GetName(), nil)
				}
			},
		}); err != nil {
			logger.Error(err, "InstanceClass informer")
			return true
		}
		// why: a scheduler without the right to list InstanceClasses (an older RBAC) must not
		// wait for them: with no grants known every class stays its namespace's, which only
		// keeps more pods apart, so a refused list counts as listed (and is logged).
		var refused atomic.Bool
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				if !refused.Swap(true) {
					logger.Error(err, "cannot list InstanceClasses; every class belongs to its pods' namespace (grant list/watch on instanceclasses.berth.dev)")
				}
			}
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
		g.mu.Lock()
		g.synced = func() bool { return refused.Load() || inf.HasSynced() }
		g.mu.Unlock()
		f.Start(ctx.Done())
		return true
	})
	return nil
}

func servesClasses(disc discovery.DiscoveryInterface) (bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(ClassGVR.GroupVersion().String())
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", ClassGVR.GroupVersion(), err)
	}
	if list == nil {
		return false, nil
	}
	for _, r := range list.APIResources {
		if r.Name == ClassGVR.Resource {
			return true, nil
		}
	}
	return false, nil
}
