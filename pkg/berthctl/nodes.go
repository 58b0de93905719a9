package berthctl

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	resourcehelper "k8s.io/component-helpers/resource"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// Load states of a node as the load watcher serves it.
const (
	Fresh   = "fresh"
	Stale   = "stale"
	Missing = "missing"
)

// NodeImagesResource is the NodeImages API the node agents write.
var NodeImagesResource = schema.GroupVersionResource{Group: berthv1alpha1.GroupVersion.Group, Version: berthv1alpha1.GroupVersion.Version, Resource: "nodeimages"}

// NodesView is `kubectl berth nodes`' answer, as -o json|yaml prints it.
type NodesView struct {
	Watcher WatcherView `json:"watcher"`
	// PlacedPodEstimate says where the per-node placed load (NodeView.Placed) was read from,
	// the leader scheduler's /debug/berth/placed, or why it was not (the client never
	// recomputes it).
	PlacedPodEstimate string     `json:"placedPodEstimate"`
	Nodes             []NodeView `json:"nodes"`
}

// WatcherView is where the numbers come from.
type WatcherView struct {
	From   string `json:"from"`
	Source string `json:"source"`
	Window string `json:"window"`
	// Time is the document's build time (Unix seconds).
	Time int64 `json:"time"`
}

// NodeView is one node.
type NodeView struct {
	Name string `json:"name"`
	// InstanceClass is the node's instance-class label (ipp-class or berth.dev/instance-class).
	InstanceClass string `json:"instanceClass,omitempty"`
	// Load is fresh, stale (the newest sample is older than the watcher's --stale-after; the
	// scheduler scores it neutral) or missing (never reported).
	Load string `json:"load"`
	// Updated is the time of the newest sample behind the numbers; AgeSeconds its age when
	// the command ran.
	Updated    *metav1.Time `json:"updated,omitempty"`
	AgeSeconds *int64       `json:"ageSeconds,omitempty"`
	CPU        ResourceView `json:"cpu"`
	Memory     ResourceView `json:"memory"`
	Images     *ImagesView  `json:"images,omitempty"`
	// Placed is what the scheduler's load-aware plugins add to the node for pods placed since
	// its last report, per profile and plugin, as the leader serves it.
	Placed []PlacedLoad `json:"placed,omitempty"`
}

// ResourceView is one resource of a node, in percent of the node (measured: of capacity, as
// the agent reports; requested: of allocatable, as kubectl describe node shows).
type ResourceView struct {
	// Average over the watcher's window and the latest sample, when the watcher has them.
	Average *float64 `json:"average,omitempty"`
	Latest  *float64 `json:"latest,omitempty"`
	// Requested is the sum of the requests of the node's pods that are not finished.
	Requested        string  `json:"requested"`
	Allocatable      string  `json:"allocatable"`
	RequestedPercent float64 `json:"requestedPercent"`
}

// ImagesView is the node's NodeImages object, written by its agent.
type ImagesView struct {
	Count    int32        `json:"count"`
	Size     string       `json:"size,omitempty"`
	Observed *metav1.Time `json:"observed,omitempty"`
	// AgeSeconds is Observed's age when the command ran.
	AgeSeconds *int64 `json:"ageSeconds,omitempty"`
	Ready      bool   `json:"ready"`
}

// CollectNodes reads nodes (by selector), their pods' requests, NodeImages and the watcher's
// document, and joins them per node. now ages the data.
func CollectNodes(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, doc *loadapi.Response, from, selector string, now time.Time) (*NodesView, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, explainAPIError(err, "list nodes")
	}
	// why: one cluster-wide list rather than one per node: a field selector per node would be
	// N requests; finished pods hold no resources.
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return nil, explainAPIError(err, "list pods in all namespaces (for requests)")
	}
	requested := requestsByNode(pods.Items)
	images, err := nodeImages(ctx, dyn)
	if err != nil {
		return nil, err
	}
	view := &NodesView{
		Watcher:           WatcherView{From: from, Source: doc.Source, Window: doc.Window.Duration, Time: doc.Timestamp},
		PlacedPodEstimate: "not asked",
		Nodes:             []NodeView{},
	}
	for i := range nodes.Items {
		view.Nodes = append(view.Nodes, nodeView(&nodes.Items[i], doc, requested[nodes.Items[i].Name], images, now))
	}
	return view, nil
}

// requestsByNode sums the CPU and memory requests of the bound, unfinished pods per node.
func requestsByNode(pods []corev1.Pod) map[string]corev1.ResourceList {
	requested := map[string]corev1.ResourceList{}
	for i := range pods {
		p := &pods[i]
		// why: the field selector already leaves finished pods out; checked again so a
		// server (or proxy) that ignores field selectors cannot inflate the requests.
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		sum := requested[p.Spec.NodeName]
		if sum == nil {
			sum = corev1.ResourceList{}
			requested[p.Spec.NodeName] = sum
		}
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				continue
			}
			cur := sum[name]
			cur.Add(q)
			sum[name] = cur
		}
	}
	return requested
}

// loadState classifies a node by the watcher's document: fresh (updated, not stale and
// measured), stale (updated once, stale or unmeasured now) or missing (never updated).
func loadState(doc *loadapi.Response, name string) string {
	st, known := doc.Nodes[name]
	_, measured := doc.Data.NodeMetricsMap[name]
	switch {
	case known && st.Updated > 0 && !st.Stale && measured:
		return Fresh
	case known && st.Updated > 0:
		return Stale
	default:
		return Missing
	}
}

// nodeView joins one node with its requests (req), its NodeImages and the watcher's numbers.
func nodeView(n *corev1.Node, doc *loadapi.Response, req corev1.ResourceList, images map[string]*ImagesView, now time.Time) NodeView {
	nv := NodeView{Name: n.Name, InstanceClass: instanceClass(n.Labels), Images: images[n.Name], Load: loadState(doc, n.Name)}
	if nv.Images != nil && nv.Images.Observed != nil {
		age := int64(now.Sub(nv.Images.Observed.Time).Seconds())
		nv.Images.AgeSeconds = &age
	}
	if st, known := doc.Nodes[n.Name]; known && st.Updated > 0 {
		t := metav1.NewTime(time.Unix(st.Updated, 0).UTC())
		age := int64(now.Sub(t.Time).Seconds())
		nv.Updated, nv.AgeSeconds = &t, &age
	}
	nv.CPU = resourceView(corev1.ResourceCPU, req, n.Status.Allocatable)
	nv.Memory = resourceView(corev1.ResourceMemory, req, n.Status.Allocatable)
	if metrics, measured := doc.Data.NodeMetricsMap[n.Name]; measured {
		for _, m := range metrics.Metrics {
			v := m.Value
			var r *ResourceView
			switch m.Type {
			case "CPU":
				r = &nv.CPU
			case "Memory":
				r = &nv.Memory
			default:
				continue
			}
			// why: the watcher orders Latest, AVG, STD per type; take each by its operator,
			// never by position.
			switch m.Operator {
			case "AVG":
				r.Average = &v
			case "Latest":
				r.Latest = &v
			}
		}
	}
	return nv
}

// instanceClass reads the class by the plugin's default label keys, from the args contract
// (api/config/v1) rather than the plugin: the plugin links k8s.io/kubernetes, kubectl-berth
// must not.
func instanceClass(labels map[string]string) string {
	for _, k := range configv1.DefaultClassLabels {
		if v := labels[k]; v != "" {
			return v
		}
	}
	return ""
}

func resourceView(name corev1.ResourceName, req, alloc corev1.ResourceList) ResourceView {
	r, a := req[name], alloc[name]
	rv := ResourceView{Requested: r.String(), Allocatable: a.String()}
	if name == corev1.ResourceMemory {
		rv.Requested, rv.Allocatable = humanBytes(r), humanBytes(a)
	}
	if a.MilliValue() > 0 {
		rv.RequestedPercent = math.Round(float64(r.MilliValue())/float64(a.MilliValue())*1000) / 10
	}
	return rv
}

// humanBytes prints memory in binary units with one decimal, as people read it.
func humanBytes(q resource.Quantity) string {
	v := float64(q.Value())
	for _, u := range []string{"", "Ki", "Mi", "Gi", "Ti"} {
		if v < 1024 || u == "Ti" {
			if u == "" {
				return fmt.Sprintf("%.0f", v)
			}
			return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + u
		}
		v /= 1024
	}
	return q.String()
}

func nodeImages(ctx context.Context, dyn dynamic.Interface) (map[string]*ImagesView, error) {
	out := map[string]*ImagesView{}
	list, err := dyn.Resource(NodeImagesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		if isNoMatch(err) {
			// why: the NodeImages CRD is installed by the chart with the image inventory;
			// without it there is nothing to show, which is not an error.
			return out, nil
		}
		return nil, explainAPIError(err, "list nodeimages.berth.dev")
	}
	for _, u := range list.Items {
		var ni berthv1alpha1.NodeImages
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ni); err != nil {
			continue
		}
		node := ni.Spec.NodeName
		if node == "" {
			node = ni.Name
		}
		iv := &ImagesView{Count: ni.Status.ImageCount, Size: ni.Status.TotalSize,
			Ready: meta.IsStatusConditionTrue(ni.Status.Conditions, berthv1alpha1.NodeImagesConditionReady)}
		if iv.Count == 0 {
			iv.Count = int32(len(ni.Spec.Images))
		}
		if !ni.Status.ObservedTime.IsZero() {
			t := ni.Status.ObservedTime
			iv.Observed = &t
		}
		out[node] = iv
	}
	return out, nil
}

// SortKeys are --sort-by's values.
var SortKeys = []string{"name", "cpu", "memory", "cpu-requests", "memory-requests", "age", "load"}

// SortNodes orders view's nodes by key (ties by name); measured keys put nodes without numbers
// last, highest first for numbers.
func SortNodes(view *NodesView, key string) error {
	num := func(f *float64) float64 {
		if f == nil {
			return math.Inf(-1)
		}
		return *f
	}
	var less func(a, b NodeView) (bool, bool) // (less, decided)
	switch key {
	case "", "name":
		less = func(a, b NodeView) (bool, bool) { return false, false }
	case "cpu", "memory", "cpu-requests", "memory-requests":
		less = func(a, b NodeView) (bool, bool) {
			var x, y float64
			switch key {
			case "cpu":
				x, y = num(a.CPU.Average), num(b.CPU.Average)
			case "memory":
				x, y = num(a.Memory.Average), num(b.Memory.Average)
			case "cpu-requests":
				x, y = a.CPU.RequestedPercent, b.CPU.RequestedPercent
			default:
				x, y = a.Memory.RequestedPercent, b.Memory.RequestedPercent
			}
			return x > y, x != y
		}
	case "age":
		less = func(a, b NodeView) (bool, bool) {
			x, y := int64(math.MaxInt64), int64(math.MaxInt64)
			if a.AgeSeconds != nil {
				x = *a.AgeSeconds
			}
			if b.AgeSeconds != nil {
				y = *b.AgeSeconds
			}
			return x > y, x != y
		}
	case "load":
		rank := map[string]int{Missing: 0, Stale: 1, Fresh: 2}
		less = func(a, b NodeView) (bool, bool) { return rank[a.Load] < rank[b.Load], a.Load != b.Load }
	default:
		return fmt.Errorf("--sort-by %q: want one of %s", key, strings.Join(SortKeys, ", "))
	}
	sort.SliceStable(view.Nodes, func(i, j int) bool {
		if l, ok := less(view.Nodes[i], view.Nodes[j]); ok {
			return l
		}
		return view.Nodes[i].Name < view.Nodes[j].Name
	})
	return nil
}
