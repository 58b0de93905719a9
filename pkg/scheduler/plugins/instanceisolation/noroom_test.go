package instanceisolation

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/plugintest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// markerTerms gives pod the webhook's terms with the autoscaler marker: the pool and marker In
// [value], else the pool and no marker.
func markerTerms(p *v1.Pod, value string) *v1.Pod {
	pool := v1.NodeSelectorRequirement{Key: "ipp", Operator: v1.NodeSelectorOpIn, Values: []string{"true"}}
	p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
		{MatchExpressions: []v1.NodeSelectorRequirement{pool, {Key: classmarker.Key, Operator: v1.NodeSelectorOpIn, Values: []string{value}}}},
		{MatchExpressions: []v1.NodeSelectorRequirement{pool, {Key: classmarker.Key, Operator: v1.NodeSelectorOpDoesNotExist}}},
	}}}}
	return p
}

func poolNode(name, marker string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"ipp": "true"}}}
	if marker != "" {
		n.Labels[classmarker.Key] = marker
	}
	return n
}

// TestPreFilterNoRoomForClass: a pod with the marker terms whose every pool node is held by
// another class (its pods, or its marker on a node an autoscaler just made) is refused at
// PreFilter with a message naming its class and the nodes, instead of per-node "didn't match
// node affinity" from NodeAffinity; with any node left for the class it is not.
func TestPreFilterNoRoomForClass(t *testing.T) {
	blue := func(node string) *v1.Pod { return newPod("blue").class("y").on(node).pod() }
	type nd struct {
		node      *v1.Node
		snapshot  []*v1.Pod // the snapshot's pods; the index gets them too unless indexMiss
		indexMiss bool
	}
	plain := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	cases := []struct {
		name      string
		nodes     []nd
		noMarker  bool
		ownMarker string
		want      string // "" PreFilter does not refuse
	}{
		{name: "every pool node held: by pods, by a marker", nodes: []nd{
			{node: poolNode("pool-1", "blue_y"), snapshot: []*v1.Pod{blue("pool-1")}},
			{node: poolNode("pool-2", "blue_z")},
			{node: plain},
		}, want: "no node of the pool can take instance class red/x: all 2 node(s) the pod's node affinity allows hold another instance class " +
			"(pool-1 blue/y, pool-2 marked blue_z); the class needs a new node (an autoscaler makes one for the pod's " + classmarker.Key + "=red_x term)"},
		{name: "held by pods before the writer marked it", nodes: []nd{{node: poolNode("pool-1", ""), snapshot: []*v1.Pod{blue("pool-1")}}},
			want: "all 1 node(s) the pod's node affinity allows hold another instance class (pool-1 blue/y)"},
		{name: "more than three held", nodes: []nd{{node: poolNode("p1", "a_a")}, {node: poolNode("p2", "a_a")}, {node: poolNode("p3", "a_a")}, {node: poolNode("p4", "a_a")}, {node: poolNode("p5", "a_a")}},
			want: "all 5 node(s) the pod's node affinity allows hold another instance class (p1 marked a_a, p2 marked a_a, p3 marked a_a, and 2 more)"},
		{name: "an empty unmarked pool node is left", nodes: []nd{{node: poolNode("pool-1", "blue_y"), snapshot: []*v1.Pod{blue("pool-1")}}, {node: poolNode("pool-2", "")}}},
		{name: "a node marked for the pod's class is left", nodes: []nd{{node: poolNode("pool-1", "blue_y"), snapshot: []*v1.Pod{blue("pool-1")}}, {node: poolNode("pool-2", "red_x")}}},
		{name: "a node holding the pod's class is left", nodes: []nd{{node: poolNode("pool-1", "blue_y"), snapshot: []*v1.Pod{blue("pool-1")}},
			{node: poolNode("pool-2", ""), snapshot: []*v1.Pod{newPod("red").class("x").on("pool-2").pod()}}}},
		{name: "index and snapshot disagree: Filter decides", nodes: []nd{{node: poolNode("pool-1", ""), snapshot: []*v1.Pod{blue("pool-1")}, indexMiss: true}}},
		{name: "no pool node at all: NodeAffinity's words", nodes: []nd{{node: plain}}},
		{name: "pod without the marker terms: unchanged (per-node reasons)", noMarker: true, nodes: []nd{{node: poolNode("pool-1", "blue_y"), snapshot: []*v1.Pod{blue("pool-1")}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestPlugin(t, &Args{})
			h := pl.PodHandler()
			var nodes []fwk.NodeInfo
			for _, n := range tc.nodes {
				for _, p := range n.snapshot {
					if !n.indexMiss {
						h.OnAdd(p, false)
					}
				}
				nodes = append(nodes, plugintest.NodeInfoOf(n.node, n.snapshot...))
			}
			pod := newPod("red").class("x").pod()
			if !tc.noMarker {
				markerTerms(pod, classmarker.MarkerValue("red/x"))
			}
			_, s := pl.PreFilter(context.Background(), framework.NewCycleState(), pod, nodes)
			if tc.want == "" {
				if !s.IsSuccess() {
					t.Fatalf("PreFilter refused: %v", s)
				}
				return
			}
			if s.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(s.Message(), tc.want) {
				t.Fatalf("PreFilter: %v %q\nwant UnschedulableAndUnresolvable containing %q", s.Code(), s.Message(), tc.want)
			}
		})
	}
}
