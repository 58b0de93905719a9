package app

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// /metrics/resources carries both sides of "requested per node": upstream's per-pod requests
// (with the node label) and each node's allocatable in the same units.
func TestResourcesHandlerServesRequestsAndAllocatable(t *testing.T) {
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(nodeIdx.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("3500m"), corev1.ResourceMemory: resource.MustParse("2Gi"), corev1.ResourcePods: resource.MustParse("110")}}}))
	// A node without allocatable yet (just registered) yields no series rather than zeros,
	// which would divide into +Inf.
	must(nodeIdx.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}))
	must(podIdx.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{NodeName: "n1", SchedulerName: "berth-scheduler", Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}}}))

	h := resourcesHandler(corelisters.NewPodLister(podIdx), corelisters.NewNodeLister(nodeIdx))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/resources", nil))
	body, _ := io.ReadAll(rec.Body)
	out := string(body)
	tests := []struct {
		series string
		want   bool
	}{
		{`berth_node_resource_allocatable{node="n1",resource="cpu",unit="cores"} 3.5`, true},
		{`berth_node_resource_allocatable{node="n1",resource="memory",unit="bytes"} 2.147483648e+09`, true},
		{`berth_node_resource_allocatable{node="n1",resource="pods",unit="integer"} 110`, true},
		{`berth_node_resource_allocatable{node="n2"`, false},
		{`kube_pod_resource_request{namespace="ns",node="n1",pod="p",priority="",resource="cpu",scheduler="berth-scheduler",unit="cores"} 0.25`, true},
	}
	for _, tc := range tests {
		if got := strings.Contains(out, tc.series); got != tc.want {
			t.Errorf("series %s present=%v, want %v\n%s", tc.series, got, tc.want, out)
		}
	}
}
