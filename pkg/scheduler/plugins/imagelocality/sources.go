package imagelocality

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/dynamicapi"
)

// GVR is the NodeImages resource.
var GVR = berthv1alpha1.GroupVersion.WithResource("nodeimages")

const syncTimeout = 30 * time.Second

// parsedNodeImages is what the informer stores instead of the NodeImages object: name and
// resourceVersion plus the parsed inventory. why: the unstructured form of a 5000-image
// inventory is megabytes; a thousand nodes of it would dwarf the scheduler.
type parsedNodeImages struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	inv inventory
}

// DeepCopyObject shares the inventory: it is never modified after parsing.
func (p *parsedNodeImages) DeepCopyObject() runtime.Object {
	c := *p
	c.ObjectMeta = *p.ObjectMeta.DeepCopy()
	return &c
}

// transformNodeImages parses each object as it enters the informer. It never fails: a
// malformed inventory keeps its readable entries (the rest are counted), and an informer
// transform error would stall the watch.
func transformNodeImages(nc *nameCache) cache.TransformFunc {
	return func(obj any) (any, error) {
		return parseObject(obj, nc), nil
	}
}

func parseObject(obj any, nc *nameCache) any {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj
	}
	inv, bad := parseNodeImages(u.Object, nc)
	if bad > 0 {
		invalidRefs.WithLabelValues(sourceNodeImages).Add(float64(bad))
	}
	return &parsedNodeImages{
		TypeMeta:   metav1.TypeMeta{APIVersion: GVR.GroupVersion().String(), Kind: "NodeImages"},
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), ResourceVersion: u.GetResourceVersion(), UID: u.GetUID()},
		inv:        inv,
	}
}

func servesNodeImages(disc discovery.DiscoveryInterface) (bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(GVR.GroupVersion().String())
	if err != nil || list == nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == GVR.Resource {
			return true, nil
		}
	}
	return false, nil
}

// startNodeImagesInformer watches NodeImages until ctx ends, waiting (bounded) for the first
// sync so the first cycles see the inventories. Without the CRD it retries in the background:
// nodes fall back to node.status.images meanwhile.
func startNodeImagesInformer(ctx context.Context, pl *NodeImageLocality, dyn dynamic.Interface, disc discovery.DiscoveryInterface) {
	dynamicapi.StartWhenServed(ctx, dynamicapi.RetryEvery, func(first bool) bool { return tryStartNodeImages(ctx, pl, dyn, disc, first) })
}

func tryStartNodeImages(ctx context.Context, pl *NodeImageLocality, dyn dynamic.Interface, disc discovery.DiscoveryInterface, first bool) bool {
	ok, err := servesNodeImages(disc)
	if !ok {
		if first {
			pl.logger.Info("NodeImages API not served yet; nodes are scored from node.status.images until it appears",
				"resource", GVR.String(), "useNodeStatus", *pl.args.UseNodeStatus, "err", err)
		}
		return false
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "", nil)
	inf := f.ForResource(GVR).Informer()
	if err := inf.SetTransform(transformNodeImages(pl.index.names)); err != nil {
		pl.logger.Error(err, "Cannot set the NodeImages transform")
		return true
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onNodeImages(pl.index, obj) },
		UpdateFunc: func(_, obj any) { onNodeImages(pl.index, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(metav1.Object); ok {
				pl.index.DeleteNodeImages(p.GetName())
			}
		},
	})
	if err != nil {
		pl.logger.Error(err, "Cannot watch NodeImages")
		return true
	}
	f.Start(ctx.Done())
	pl.logger.Info("Watching NodeImages", "resource", GVR.String())
	wctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	// The registration's HasSynced: the handler has filled the index with the initial list,
	// not only the informer's store (the first cycles read the index).
	if !cache.WaitForCacheSync(wctx.Done(), reg.HasSynced) {
		pl.logger.Error(nil, "NodeImages informer did not sync in time; continuing, scores improve once it does", "timeout", syncTimeout)
	}
	return true
}

func onNodeImages(ix *Index, obj any) {
	if p, ok := obj.(*parsedNodeImages); ok {
		ix.setInventory(p.Name, p.inv)
	}
}

// watchNodesAndPods hooks the scheduler's own node informer (node.status.images) and pod
// informer (pods bound by any scheduler count as pulling their images).
func watchNodesAndPods(pl *NodeImageLocality, f informers.SharedInformerFactory) error {
	ix := pl.index
	if *pl.args.UseNodeStatus {
		_, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if n, ok := obj.(*v1.Node); ok {
					onNodeStatus(ix, n)
				}
			},
			UpdateFunc: func(oldObj, obj any) {
				o, _ := oldObj.(*v1.Node)
				n, ok := obj.(*v1.Node)
				// why: nodes update their status every few seconds; the images rarely change,
				// and normalising them on every heartbeat would cost for nothing.
				if ok && (o == nil || !apiequality.Semantic.DeepEqual(o.Status.Images, n.Status.Images)) {
					onNodeStatus(ix, n)
				}
			},
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				if n, ok := obj.(*v1.Node); ok {
					ix.DeleteNode(n.Name)
				}
			},
		})
		if err != nil {
			return err
		}
	}
	if pl.args.AssumePulledFor.Duration <= 0 {
		return nil
	}
	_, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onPod(ix, obj) },
		UpdateFunc: func(_, obj any) { onPod(ix, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				ix.Forget(p.UID, "")
			}
		},
	})
	return err
}

func onNodeStatus(ix *Index, n *v1.Node) {
	inv, bad := parseNodeStatus(n.Status.Images, ix.names)
	if bad > 0 {
		invalidRefs.WithLabelValues(sourceNodeStatus).Add(float64(bad))
	}
	ix.SetNodeStatus(n.Name, inv)
}

// onPod records the images of a pod bound within the window (by any scheduler, or created
// with spec.nodeName) as pulling on its node. Pods already recorded (at Reserve) keep their
// record; pods placed longer ago than the window are skipped before any parsing.
func onPod(ix *Index, obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return
	}
	placed := placedAt(p)
	if !placed.Add(ix.window).After(ix.now()) || ix.HasPull(p.UID) {
		return
	}
	var keys []string
	for _, ku := range imagesOf(p).keys {
		keys = append(keys, ku.key)
	}
	ix.AssumePulled(p.UID, p.Spec.NodeName, keys, placed)
}
