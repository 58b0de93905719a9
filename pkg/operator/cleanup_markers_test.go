package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

// TestCleanupIsolationMarkers: the uninstall hook removes the autoscaler marker from every node
// only after the operator, its only writer, is stopped (else it would write them again), leaves
// every other label, and does nothing when not asked.
func TestCleanupIsolationMarkers(t *testing.T) {
	opLabels := map[string]string{"app.kubernetes.io/name": "berth-operator", "app.kubernetes.io/instance": "berth"}
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
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
			sim := &nodeSim{t: t, operatorLabels: opLabels, agentLabels: map[string]string{"none": "none"}}
			node := func(name string, l map[string]string) *corev1.Node {
				return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
			}
			c := sim.client(scheme,
				&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "berth-operator", Namespace: "berth-system"},
					Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: opLabels}}},
				pod("operator-0", opLabels),
				node("n1", map[string]string{classmarker.Key: "red_a", "ipp": "true"}),
				node("n2", map[string]string{classmarker.Key: "blue_b", "ipp": "true"}),
				node("n3", map[string]string{"ipp": "true"}))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			o := CleanupOptions{Namespace: "berth-system", OperatorDeployment: "berth-operator", OperatorLease: "berth-operator",
				IsolationMarkers: tc.markers, Interval: 5 * time.Millisecond}
			if err := Cleanup(ctx, c, o); err != nil {
				t.Fatal(err)
			}
			var events []string
			for _, e := range sim.events {
				if !strings.HasPrefix(e, "delete Lease") && e != "agent pods gone" {
					events = append(events, e)
				}
			}
			if got := strings.Join(events, "; "); got != tc.wantEvents {
				t.Errorf("events:\n got %s\nwant %s", got, tc.wantEvents)
			}
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
