package images

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewForCluster fills cfg's store, node getter and event recorder from API clients and builds
// the publisher. stop flushes and stops the event broadcaster.
func NewForCluster(cfg Config, cs kubernetes.Interface, dyn dynamic.Interface) (p *Publisher, stop func(), err error) {
	cfg.Store = DynamicStore{Client: dyn}
	cfg.GetNode = func(ctx context.Context, name string) (*corev1.Node, error) {
		return cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	cfg.Recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "berth-agent", Host: cfg.NodeName})
	p, err = New(cfg)
	if err != nil {
		b.Shutdown()
		return nil, nil, err
	}
	return p, b.Shutdown, nil
}
