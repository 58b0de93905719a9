package operator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// TestCleanupIsolationMarkers: the uninstall hook removes the autoscaler marker from every node
// only after the operator, its only writer, is stopped (else it would write them again), leaves
// every other label, and does nothing when not asked.
func TestCleanupIsolationMarkers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		markers    bool
		wantEvents string
		wantLeft   string
	}{
		{"asked: removed after the operator's pods are gone", true, "scale berth-operator; operator pods gone; release Node n1; release Node n2", ""},
		{"not asked: left alone", false, "scale berth-operator; operator pods gone", "n1=red_a n2=blue_b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := func(name string, l map[string]string) *corev1.Node {
				return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
			}
			c, ctx := cleanupAfterOperator(t, CleanupOptions{IsolationMarkers: tc.markers}, tc.wantEvents,
				node("n1", map[string]string{classmarker.Key: "red_a", "ipp": "true"}),
				node("n2", map[string]string{classmarker.Key: "blue_b", "ipp": "true"}),
				node("n3", map[string]string{"ipp": "true"}))
			var nodes corev1.NodeList
			if err := c.List(ctx, &nodes); err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, n := range nodes.Items {
				if n.Labels["ipp"] != "true" {
					t.Errorf("node %s lost its other labels: %v", n.Name, n.Labels)
				}
				if v, ok := n.Labels[classmarker.Key]; ok {
					left = append(left, n.Name+"="+v)
				}
			}
			if got := strings.Join(left, " "); got != tc.wantLeft {
				t.Errorf("markers left %q, want %q", got, tc.wantLeft)
			}
		})
	}
}
