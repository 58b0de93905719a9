package sysched

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-sched/berth/pkg/scheduler/dynamicapi"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/profiles"
)

// Versions are tried newest first; SPO >= v1.0 stores v1 and still serves the older ones only
// through its conversion webhook, so v1 avoids depending on that webhook being up.
var (
	seccompVersions = []string{"v1", "v1beta1", "v1alpha1"}
	bindingVersions = []string{"v1", "v1alpha1"}
	statusVersions  = []string{"v1", "v1alpha1"}
)

const syncTimeout = 30 * time.Second

// found is one discovered SPO resource.
type found struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// discoverSPO finds the served version and scope of SeccompProfile and ProfileBinding.
func discoverSPO(disc discovery.DiscoveryInterface) (seccomp, binding, status *found, err error) {
	lookup := func(resource string, versions []string) *found {
		for _, v := range versions {
			list, lerr := disc.ServerResourcesForGroupVersion(profiles.Group + "/" + v)
			if lerr != nil || list == nil {
				if lerr != nil {
					err = lerr
				}
				continue
			}
			for _, r := range list.APIResources {
				if r.Name == resource {
					return &found{gvr: schema.GroupVersionResource{Group: profiles.Group, Version: v, Resource: resource}, namespaced: r.Namespaced}
				}
			}
		}
		return nil
	}
	seccomp = lookup("seccompprofiles", seccompVersions)
	binding = lookup("profilebindings", bindingVersions)
	status = lookup("securityprofilenodestatuses", statusVersions)
	if seccomp != nil {
		err = nil
	}
	return seccomp, binding, status, err
}

// startProfileInformers discovers SPO's API and runs dynamic informers feeding st until ctx
// ends. It waits (bounded) for the first sync so the first scheduling cycles already see the
// profiles; when SPO's CRDs are not installed yet it keeps retrying in the background.
func startProfileInformers(ctx context.Context, st *state, dyn dynamic.Interface, disc discovery.DiscoveryInterface) {
	dynamicapi.StartWhenServed(ctx, dynamicapi.RetryEvery, func(first bool) bool { return tryStart(ctx, st, dyn, disc, first) })
}

func tryStart(ctx context.Context, st *state, dyn dynamic.Interface, disc discovery.DiscoveryInterface, first bool) bool {
	sp, pb, sns, err := discoverSPO(disc)
	if sp == nil {
		if first {
			st.logger.Info("SeccompProfile API not served yet; every pod counts as the full profile until it appears", "group", profiles.Group, "err", err)
		}
		return false
	}
	st.logger.Info("Watching SPO resources", "seccompProfiles", sp.gvr.String(), "namespaced", sp.namespaced, "profileBindings", pb != nil, "nodeStatuses", sns != nil)
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	// Synced means each handler has been handed the initial list (the registration's
	// HasSynced), not only that the informer's store holds it: the first cycles must see the
	// profiles in st, which only the handlers fill.
	var synced []cache.InformerSynced
	watch := func(gvr schema.GroupVersionResource, h cache.ResourceEventHandlerFuncs) {
		reg, err := f.ForResource(gvr).Informer().AddEventHandler(h)
		if err != nil {
			st.logger.Error(err, "Watching an SPO resource failed", "resource", gvr.String())
			return
		}
		synced = append(synced, reg.HasSynced)
	}
	watch(sp.gvr, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { onProfile(st, obj) },
		UpdateFunc: func(_, obj interface{}) { onProfile(st, obj) },
		DeleteFunc: func(obj interface{}) { onProfileDelete(st, obj) },
	})
	if pb != nil {
		watch(pb.gvr, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { onBinding(st, obj) },
			UpdateFunc: func(_, obj interface{}) { onBinding(st, obj) },
			DeleteFunc: func(obj interface{}) { onBindingDelete(st, obj) },
		})
	}
	if sns != nil {
		watch(sns.gvr, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { onNodeStatus(st, obj) },
			UpdateFunc: func(_, obj interface{}) { onNodeStatus(st, obj) },
			DeleteFunc: func(obj interface{}) {
				if u := unstructuredOf(obj); u != nil {
					st.deleteNodeStatus(u.GetName())
				}
			},
		})
	}
	f.Start(ctx.Done())
	wctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), synced...) {
		st.logger.Error(nil, "SPO informers did not sync in time; continuing, scores improve once they do", "timeout", syncTimeout)
	}
	return true
}

func unstructuredOf(obj interface{}) *unstructured.Unstructured {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

func onProfile(st *state, obj interface{}) {
	u := unstructuredOf(obj)
	if u == nil {
		return
	}
	p, errs := profiles.ParseProfile(u.Object)
	if len(errs) > 0 {
		st.logger.Error(fmt.Errorf("%v", errs), "Malformed SeccompProfile; using the readable part", "profile", u.GetNamespace()+"/"+u.GetName())
	}
	if p == nil {
		return
	}
	if unknown := profiles.UnknownSyscalls(p.Syscalls); len(unknown) > 0 {
		inputIssues.WithLabelValues("profile_unknown_syscall").Inc()
		st.logger.Info("SeccompProfile names syscalls Linux does not have; counted as names all the same", "profile", p.Key.String(), "names", unknown)
	}
	st.upsertProfile(p)
}

func onProfileDelete(st *state, obj interface{}) {
	if u := unstructuredOf(obj); u != nil {
		st.deleteProfile(profiles.Key{Namespace: u.GetNamespace(), Name: u.GetName()})
	}
}

func onBinding(st *state, obj interface{}) {
	u := unstructuredOf(obj)
	if u == nil {
		return
	}
	b, err := profiles.ParseBinding(u.Object)
	if err != nil {
		st.logger.Error(err, "Ignoring malformed ProfileBinding")
	}
	if b == nil {
		// A binding edited into something unusable must stop applying.
		st.deleteBinding(u.GetNamespace(), u.GetName())
		return
	}
	st.upsertBinding(b)
}

func onBindingDelete(st *state, obj interface{}) {
	if u := unstructuredOf(obj); u != nil {
		st.deleteBinding(u.GetNamespace(), u.GetName())
	}
}

// watchPods feeds st from the scheduler's own pod informer: every pod bound to a node counts,
// whatever scheduler placed it, until it terminates or is deleted.
func watchPods(st *state, f informers.SharedInformerFactory) error {
	_, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { onPod(st, obj) },
		UpdateFunc: func(_, obj interface{}) { onPod(st, obj) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				st.removePod(p.UID, "")
				st.waiting.forget(p.UID)
			}
		},
	})
	return err
}

func onPod(st *state, obj interface{}) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	switch {
	case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed:
		st.removePod(p.UID, "")
		st.waiting.forget(p.UID)
	case p.Spec.NodeName != "":
		st.addPod(p, p.Spec.NodeName, false, nil)
		st.waiting.forget(p.UID)
	}
	// Unbound pods are ignored: a Reserve-d pod stays counted until Unreserve or deletion.
}

// onNodeStatus records a SecurityProfileNodeStatus of a seccomp profile. One it cannot read,
// or one for a node the scheduler does not know, is counted and left out: it can only make the
// Filter refuse nodes, so an unreadable one must not.
func onNodeStatus(st *state, obj interface{}) {
	u := unstructuredOf(obj)
	if u == nil {
		return
	}
	ns, err := profiles.ParseNodeStatus(u.Object)
	if err != nil {
		inputIssues.WithLabelValues("node_status_malformed").Inc()
		st.logger.Error(err, "Ignoring a SecurityProfileNodeStatus")
		st.deleteNodeStatus(u.GetName())
		return
	}
	if ns.Kind != "" && ns.Kind != "SeccompProfile" {
		return
	}
	if st.nodeKnown != nil && !st.nodeKnown(ns.Node) {
		inputIssues.WithLabelValues("node_status_unknown_node").Inc()
		st.logger.V(2).Info("SecurityProfileNodeStatus for a node the scheduler does not know; recorded all the same", "object", ns.Name, "node", ns.Node)
	}
	st.upsertNodeStatus(ns)
}
