package instanceisolation

import (
	"context"
	"fmt"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/isolation/classrule"
	"github.com/berth-sched/berth/pkg/scheduler/dynamicapi"
)

// ClassGVR is the InstanceClass resource: the administrator's grant of one class value to a
// list of namespaces (README.md, "Classes belong to namespaces").
var ClassGVR = berthv1alpha1.GroupVersion.WithResource("instanceclasses")

// Grants is what the plugin knows of the InstanceClasses (pkg/isolation/classrule, where the
// rule lives for the operator's rebalancer too).
type Grants = classrule.Grants

// NewGrants returns an empty set of grants.
func NewGrants() *Grants { return classrule.NewGrants() }

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
		g.SetSynced(func() bool { return refused.Load() || inf.HasSynced() })
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
