// Package plugintest holds what the unit tests of Berth's scheduler plugins share: a framework
// handle that offers only what the plugins use, and NodeInfos. Tests only; nothing in the
// scheduler imports it.
package plugintest

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Handle provides only what Berth's plugins use; any other Handle method panics through the
// nil embedded interface, which exposes an unexpected dependency at once.
type Handle struct {
	fwk.Handle
	Factory  informers.SharedInformerFactory
	Snapshot fwk.SharedLister
	Recorder events.EventRecorderLogger
	Profile  string
	// OnActivate, if set, is told the pods a plugin hands back to the scheduling queue.
	OnActivate func(pods map[string]*v1.Pod)
}

// Activate implements fwk.PodActivator.
func (h *Handle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	if h.OnActivate != nil {
		h.OnActivate(pods)
	}
}

// SharedInformerFactory implements fwk.Handle.
func (h *Handle) SharedInformerFactory() informers.SharedInformerFactory { return h.Factory }

// SnapshotSharedLister implements fwk.Handle.
func (h *Handle) SnapshotSharedLister() fwk.SharedLister { return h.Snapshot }

// EventRecorder implements fwk.Handle.
func (h *Handle) EventRecorder() events.EventRecorderLogger { return h.Recorder }

// ProfileName implements fwk.Handle.
func (h *Handle) ProfileName() string { return h.Profile }

// NodeInfo is a scheduler NodeInfo for a node of that name holding pods.
func NodeInfo(name string, pods ...*v1.Pod) *framework.NodeInfo {
	return NodeInfoOf(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, pods...)
}

// NodeInfoOf is a scheduler NodeInfo for node holding pods.
func NodeInfoOf(node *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(node)
	return ni
}
