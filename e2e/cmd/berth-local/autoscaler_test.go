package main

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

func TestCheckAutoscaler(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"", ""},
		{"karpenter", ""},
		{"cluster-autoscaler", `-autoscaler "cluster-autoscaler": the local cluster runs only "karpenter"`},
		{"Karpenter", `-autoscaler "Karpenter"`},
	} {
		err := checkAutoscaler(tc.name)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkAutoscaler(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// up -autoscaler karpenter's NodePools, as the API server stores them: the chart's default
// isolation pool (ipp=true label and taint, the marker Exists) and the tainted plain pool.
func TestAutoscalerOnLocalCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{Logf: t.Logf, WithoutDefaultScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	names, err := startAutoscaler(ctx, c, AutoscalerKarpenter)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != IsolationNodePoolName+","+AutoscaledNodePoolName {
		t.Errorf("NodePools %v", names)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pool, labelKey, taintKey string
		marker                   bool
	}{
		{IsolationNodePoolName, "ipp", "ipp", true},
		{AutoscaledNodePoolName, cluster.AutoscaledPoolLabel, cluster.AutoscaledPoolLabel, false},
	} {
		np, err := dyn.Resource(cluster.NodePoolGVR).Get(ctx, tc.pool, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(np.Object, "spec", "template", "metadata", "labels", tc.labelKey); v != "true" {
			t.Errorf("%s: label %s=%q, want true", tc.pool, tc.labelKey, v)
		}
		taints, _, _ := unstructured.NestedSlice(np.Object, "spec", "template", "spec", "taints")
		if len(taints) != 1 || taints[0].(map[string]any)["key"] != tc.taintKey {
			t.Errorf("%s: taints %v, want %s", tc.pool, taints, tc.taintKey)
		}
		reqs, _, _ := unstructured.NestedSlice(np.Object, "spec", "template", "spec", "requirements")
		marker := false
		for _, r := range reqs {
			m := r.(map[string]any)
			marker = marker || m["key"] == classmarker.Key && m["operator"] == "Exists"
		}
		if marker != tc.marker {
			t.Errorf("%s: marker requirement %v, want %v (%v)", tc.pool, marker, tc.marker, reqs)
		}
		if p, _, _ := unstructured.NestedString(np.Object, "spec", "disruption", "consolidationPolicy"); p != "WhenEmpty" {
			t.Errorf("%s: consolidationPolicy %q", tc.pool, p)
		}
	}
	// A second start in the same cluster is refused, naming Karpenter.
	if _, err := startAutoscaler(ctx, c, AutoscalerKarpenter); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second start: %v", err)
	}
}
