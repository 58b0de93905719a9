package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

// AutoscalerKarpenter is the one autoscaler the local cluster can run (-autoscaler karpenter,
// make up AUTOSCALER=karpenter): Karpenter's KWOK provider, built from source by `make tools`.
const AutoscalerKarpenter = "karpenter"

// Local NodePools `up -autoscaler karpenter` creates.
const (
	// IsolationNodePoolName is the chart's default isolation pool (label and taint ipp=true),
	// so `helm install` with isolation.enabled finds its nodes made on demand.
	IsolationNodePoolName = "berth-isolation"
	// AutoscaledNodePoolName is a plain autoscaled pool, tainted: only pods that select
	// berth.dev/autoscaled-pool=true and tolerate it get its nodes.
	AutoscaledNodePoolName = "berth-autoscaled"
	// localConsolidateAfter: an empty node goes after this (plus a disruption loop), short so
	// scale-down can be watched.
	localConsolidateAfter = 30 * time.Second
)

// checkAutoscaler refuses an autoscaler the local cluster cannot run, naming the one it can.
func checkAutoscaler(name string) error {
	switch name {
	case "", AutoscalerKarpenter:
		return nil
	}
	return fmt.Errorf("-autoscaler %q: the local cluster runs only %q (Karpenter's KWOK provider; the Cluster Autoscaler module is not served here), or none (empty)", name, AutoscalerKarpenter)
}

// localNodePools are the NodePools of `up -autoscaler karpenter`.
func localNodePools() []cluster.NodePoolSpec {
	d := webhook.Defaults()
	return []cluster.NodePoolSpec{
		cluster.IsolationNodePool(IsolationNodePoolName,
			corev1.NodeSelectorRequirement{Key: d.PoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{d.PoolValue}},
			corev1.Taint{Key: d.TaintKey, Value: d.TaintValue, Effect: d.TaintEffect},
			localConsolidateAfter),
		cluster.AutoscaledNodePool(AutoscaledNodePoolName, true, localConsolidateAfter),
	}
}

// startAutoscaler starts Karpenter in c with the local NodePools and returns their names.
func startAutoscaler(ctx context.Context, c *cluster.Cluster, name string) ([]string, error) {
	if name == "" {
		return nil, nil
	}
	if err := checkAutoscaler(name); err != nil {
		return nil, err
	}
	if _, err := c.StartKarpenter(ctx, cluster.KarpenterOptions{}); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range localNodePools() {
		if _, err := dyn.Resource(cluster.NodePoolGVR).Create(ctx, cluster.NodePoolObject(s), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating NodePool %s: %w", s.Name, err)
		}
		names = append(names, s.Name)
	}
	return names, nil
}
