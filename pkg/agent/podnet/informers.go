package podnet

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// NewForCluster wires the informers: PodConfigs, PodNetworks, IPAllocations, Namespaces and
// Nodes (addresses only) of the whole cluster (read only) and the pods of this node (field
// selector spec.nodeName).
func NewForCluster(cfg Config, kube kubernetes.Interface, dyn dynamic.Interface) (*Executor, func(<-chan struct{}), error) {
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	pcInf := df.ForResource(PodConfigGVR).Informer()
	alInf := df.ForResource(IPAllocationGVR).Informer()
	pnInf := df.ForResource(PodNetworkGVR).Informer()
	// Typed objects in the stores: converted once per event, not on every read.
	if err := pcInf.SetTransform(toTyped[berthv1alpha1.PodConfig]); err != nil {
		return nil, nil, err
	}
	if err := alInf.SetTransform(toTyped[berthv1alpha1.IPAllocation]); err != nil {
		return nil, nil, err
	}
	if err := pnInf.SetTransform(toTyped[berthv1alpha1.PodNetwork]); err != nil {
		return nil, nil, err
	}
	nsf := informers.NewSharedInformerFactory(kube, 0)
	nsInf := nsf.Core().V1().Namespaces()
	kf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	}))
	podInf := kf.Core().V1().Pods()
	nodeInf := nsf.Core().V1().Nodes()
	// Every agent caches every node: only names and addresses are kept (the rest of a node,
	// its images above all, is most of its size).
	if err := nodeInf.Informer().SetTransform(nodeAddressesOnly); err != nil {
		return nil, nil, err
	}
	cfg.Nodes = nodeInf.Lister()
	e, err := New(cfg, pcInf.GetIndexer(), alInf.GetIndexer(), pnInf.GetIndexer(), nsInf.Lister(), podInf.Lister())
	if err != nil {
		return nil, nil, err
	}
	e.synced = []cache.InformerSynced{pcInf.HasSynced, alInf.HasSynced, pnInf.HasSynced, nsInf.Informer().HasSynced, podInf.Informer().HasSynced,
		nodeInf.Informer().HasSynced}
	_, _ = pcInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.enqueueObj(o) },
		UpdateFunc: func(_, o any) { e.enqueueObj(o) },
		DeleteFunc: func(any) { e.queue.Add(sweepKey) },
	})
	on := func(inf cache.SharedIndexInformer, f func(o any)) {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, o any) { f(o) }, DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			f(o)
		}})
	}
	// An allocation or a network change may concern any PodConfig and any link.
	all := func(any) { e.enqueueAll(); e.queue.Add(sweepKey) }
	on(alInf, all)
	on(pnInf, all)
	// A namespace's labels decide its grants; a pod concerns the PodConfigs of its namespace.
	on(nsInf.Informer(), func(o any) {
		if ns, ok := o.(*corev1.Namespace); ok {
			e.enqueueNamespace(ns.Name)
		}
	})
	// A node that comes or changes its addresses may make a configured network refused here.
	_, _ = nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { e.enqueueAll() },
		UpdateFunc: func(o, n any) {
			on, ok1 := o.(*corev1.Node)
			nn, ok2 := n.(*corev1.Node)
			if !ok1 || !ok2 || !slices.Equal(on.Status.Addresses, nn.Status.Addresses) {
				e.enqueueAll()
			}
		},
	})
	on(podInf.Informer(), func(o any) {
		if p, ok := o.(*corev1.Pod); ok {
			e.enqueueNamespace(p.Namespace)
		}
	})
	start := func(stop <-chan struct{}) { df.Start(stop); kf.Start(stop); nsf.Start(stop) }
	return e, start, nil
}

// nodeAddressesOnly keeps a node's name, resourceVersion and addresses.
func nodeAddressesOnly(o any) (any, error) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return o, nil // a tombstone
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

func toTyped[T any](o any) (any, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o, nil // a tombstone or an already converted object
	}
	t := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
		return nil, err
	}
	return t, nil
}

// HasSynced reports whether the informers have synced (true without informers).
func (e *Executor) HasSynced() bool {
	for _, s := range e.synced {
		if !s() {
			return false
		}
	}
	return true
}
