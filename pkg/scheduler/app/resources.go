package app

import (
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/kubernetes/pkg/scheduler/metrics/resources"
)

// nodeAllocatableDesc is the denominator upstream's kube_pod_resource_request lacks on
// /metrics/resources. Why the scheduler serves it and not kube-state-metrics: "measured against
// requested per node" is the gap Berth exists to show, and it should not need a third exporter;
// the scheduler already holds every node in its informer, and both series then come from one
// scrape of one snapshot.
var nodeAllocatableDesc = metrics.NewDesc("berth_node_resource_allocatable",
	"Allocatable resources of each node as the scheduler's informer holds them, in the units kube_pod_resource_request uses, so requested utilisation per node is sum by (node) (kube_pod_resource_request) / berth_node_resource_allocatable.",
	[]string{"node", "resource", "unit"}, nil, metrics.ALPHA, "")

type nodeAllocatableCollector struct {
	metrics.BaseStableCollector
	nodes corelisters.NodeLister
}

func (c *nodeAllocatableCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- nodeAllocatableDesc
}

func (c *nodeAllocatableCollector) CollectWithStability(ch chan<- metrics.Metric) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		for _, r := range []struct {
			name corev1.ResourceName
			unit string
		}{{corev1.ResourceCPU, "cores"}, {corev1.ResourceMemory, "bytes"}, {corev1.ResourcePods, "integer"}} {
			q, ok := n.Status.Allocatable[r.name]
			if !ok {
				continue
			}
			ch <- metrics.NewLazyConstMetric(nodeAllocatableDesc, metrics.GaugeValue, q.AsApproximateFloat64(), n.Name, string(r.name), r.unit)
		}
	}
}

// resourcesHandler serves upstream's per-pod requests and limits plus each node's allocatable,
// from one registry.
func resourcesHandler(pods corelisters.PodLister, nodes corelisters.NodeLister) http.Handler {
	reg := metrics.NewKubeRegistry()
	reg.CustomMustRegister(resources.NewPodResourcesMetricsCollector(pods), &nodeAllocatableCollector{nodes: nodes})
	return metrics.HandlerWithReset(reg, metrics.HandlerOpts{})
}
