package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sched/berth/e2e/cluster"
)

func TestParseAddNodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		check   func(addNodesOpts) bool
	}{
		{name: "count first, defaults", args: []string{"3"}, check: func(o addNodesOpts) bool {
			return o.count == 3 && o.spec.CPU == "8" && o.spec.Memory == "32Gi" && o.spec.Pods == 110 && o.prefix == "kwok-node"
		}},
		{name: "count after flags, labels and taints", args: []string{"-cpu", "4", "-label", "pool=a", "-label", "zone=z1", "-taint", "dedicated=a:NoSchedule", "-taint", "gpu:NoExecute", "2"},
			check: func(o addNodesOpts) bool {
				return o.count == 2 && o.spec.CPU == "4" && o.spec.Labels["pool"] == "a" && o.spec.Labels["zone"] == "z1" && len(o.spec.Taints) == 2 &&
					o.spec.Taints[0] == corev1.Taint{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule} &&
					o.spec.Taints[1] == corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoExecute}
			}},
		{name: "no count", args: []string{"-cpu", "4"}, wantErr: "how many nodes? give N"},
		{name: "zero", args: []string{"0"}, wantErr: `N="0": want a number from 1 to 1000`},
		{name: "too many", args: []string{"10000"}, wantErr: `N="10000"`},
		{name: "not a number", args: []string{"three"}, wantErr: `N="three"`},
		{name: "bad cpu", args: []string{"1", "-cpu", "lots"}, wantErr: `-cpu "lots": want a positive quantity`},
		{name: "negative memory", args: []string{"1", "-memory", "-1Gi"}, wantErr: `-memory "-1Gi"`},
		{name: "label without value", args: []string{"1", "-label", "pool"}, wantErr: `-label "pool": want key=value`},
		{name: "bad label key", args: []string{"1", "-label", "a b=c"}, wantErr: `-label "a b=c"`},
		{name: "taint without effect", args: []string{"1", "-taint", "dedicated=a"}, wantErr: `taint "dedicated=a": want key[=value]:Effect`},
		{name: "taint with a bad effect", args: []string{"1", "-taint", "k=v:Never"}, wantErr: `effect "Never" is not NoSchedule`},
		{name: "bad prefix", args: []string{"1", "-prefix", "Bad_Name"}, wantErr: `-prefix "Bad_Name"`},
		{name: "zero pods", args: []string{"1", "-pods", "0"}, wantErr: "-pods 0"},
		{name: "stray argument", args: []string{"1", "2"}, wantErr: "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			o, err := parseAddNodes(tc.args, &stderr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(o) {
				t.Fatalf("parsed %+v, err %v", o, err)
			}
		})
	}
}

func TestNextNodeNames(t *testing.T) {
	for _, tc := range []struct {
		existing []string
		n        int
		want     string
	}{
		{nil, 3, "kwok-node-1,kwok-node-2,kwok-node-3"},
		{[]string{"kwok-node-1", "kwok-node-3", "berth-real"}, 3, "kwok-node-2,kwok-node-4,kwok-node-5"},
	} {
		if got := strings.Join(cluster.NextNodeNames(tc.existing, "kwok-node", tc.n), ","); got != tc.want {
			t.Errorf("NextNodeNames(%v, %d) = %s, want %s", tc.existing, tc.n, got, tc.want)
		}
	}
}

// TestAddNodesRefusesWithoutCluster: with no supervisor holding the state directory's lock,
// add-nodes says so and creates nothing.
func TestAddNodesRefusesWithoutCluster(t *testing.T) {
	o, err := parseAddNodes([]string{"1", "-dir", t.TempDir()}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	err = addNodes(context.Background(), o, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no local cluster running") || !strings.Contains(err.Error(), "make up") {
		t.Fatalf("error = %v", err)
	}
}

// TestAddNodesOnLocalCluster runs add-nodes against a local cluster's API server and KWOK (as
// make up runs them): the nodes come up Ready with the asked capacity, labels and taints; beside
// a node KWOK does not simulate they carry KWOK's taint, and a second call continues the names.
func TestAddNodesOnLocalCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{Logf: t.Logf, WithoutDefaultScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)

	// Only simulated nodes so far (none): like up -simulated, no KWOK taint.
	o, err := parseAddNodes([]string{"2", "-cpu", "4", "-memory", "8Gi", "-pods", "50", "-label", "pool=a", "-taint", "dedicated=a:NoSchedule"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := joinNodes(ctx, c.Kubeconfig, o, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "added 2 simulated nodes") || !strings.Contains(out.String(), "kwok-node-1 kwok-node-2") {
		t.Errorf("output: %s", out.String())
	}
	for _, name := range []string{"kwok-node-1", "kwok-node-2"} {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.Allocatable.Cpu().String() != "4" || n.Status.Allocatable.Memory().String() != "8Gi" || n.Status.Allocatable.Pods().Value() != 50 {
			t.Errorf("%s allocatable %v", name, n.Status.Allocatable)
		}
		if n.Labels["pool"] != "a" || n.Annotations[cluster.KWOKNodeAnnotation] != "fake" {
			t.Errorf("%s labels %v annotations %v", name, n.Labels, n.Annotations)
		}
		if !hasTaint(n, "dedicated") || hasTaint(n, cluster.SimulatedTaint.Key) {
			t.Errorf("%s taints %v: want dedicated and not KWOK's (simulated-only cluster)", name, n.Spec.Taints)
		}
	}

	// A node KWOK does not manage (what a real node is to it): new simulated nodes now carry
	// KWOK's taint.
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "berth-real"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err = parseAddNodes([]string{"1"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := joinNodes(ctx, c.Kubeconfig, o, &out); err != nil {
		t.Fatal(err)
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "kwok-node-3", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the second call did not continue the names: %v (output %s)", err, out.String())
	}
	if !hasTaint(n, cluster.SimulatedTaint.Key) || !strings.Contains(out.String(), "with KWOK's taint") {
		t.Errorf("beside a real node: taints %v, output %s", n.Spec.Taints, out.String())
	}

	// A name taken by a node: refused, naming it.
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "taken-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.JoinSimulatedNodes(ctx, c.Client, []cluster.NodeSpec{{Name: "taken-1"}}, time.Second); err == nil || !strings.Contains(err.Error(), "node taken-1 already exists") {
		t.Errorf("an existing name: %v", err)
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
