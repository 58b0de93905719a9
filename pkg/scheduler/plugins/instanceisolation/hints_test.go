package instanceisolation

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

func TestEventsToRegister(t *testing.T) {
	pl := newTestPlugin(t, nil)
	evs, err := pl.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[fwk.EventResource]fwk.ActionType{
		fwk.Node:        fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint,
		fwk.AssignedPod: fwk.Delete | fwk.UpdatePodLabel,
		fwk.TargetPod:   fwk.UpdatePodLabel,
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events, want %d", len(evs), len(want))
	}
	for _, e := range evs {
		if want[e.Event.Resource] != e.Event.ActionType || e.QueueingHintFn == nil {
			t.Errorf("event %v: action %v, hint set %v", e.Event.Resource, e.Event.ActionType, e.QueueingHintFn != nil)
		}
	}
}

func TestQueueingHints(t *testing.T) {
	node := func(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	relabel := func(p *v1.Pod, k, v string) *v1.Pod {
		c := p.DeepCopy()
		c.Labels[k] = v
		return c
	}
	podA := newPod("t1").class("a").pod()
	marked := func(name, value string) *v1.Node {
		n := node(name)
		n.Labels = map[string]string{classmarker.Key: value}
		return n
	}
	// podA as the webhook writes it with the autoscaler marker on: its class's value, or none.
	// why "a": the test plugin lists no InstanceClass (classes_test.go), so a is read in its
	// shared form "a (shared)", whose marker value is "a".
	own := classmarker.MarkerValue(classmarker.SharedClass("a"))
	podAMarker := podA.DeepCopy()
	podAMarker.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{
			{MatchExpressions: []v1.NodeSelectorRequirement{{Key: classmarker.Key, Operator: v1.NodeSelectorOpIn, Values: []string{own}}}},
			{MatchExpressions: []v1.NodeSelectorRequirement{{Key: classmarker.Key, Operator: v1.NodeSelectorOpDoesNotExist}}},
		}}}}
	podB := newPod("t2").class("b").on("busy").pod()
	plain := newPod("t2").on("busy").pod()
	sts := newPod("t1").class("a").owned("StatefulSet", "db").on("busy").pod()
	cases := []struct {
		name     string
		args     *Args
		hint     string // node, assigned, target
		pod      *v1.Pod
		old, new any
		want     fwk.QueueingHint
	}{
		{name: "node added", hint: "node", pod: podA, new: node("fresh"), want: fwk.Queue},
		{name: "node added, unclassed pod not strict", hint: "node", pod: newPod("t1").pod(), new: node("fresh"), want: fwk.QueueSkip},
		{name: "node added, unclassed pod strict", args: &Args{Strict: boolp(true)}, hint: "node", pod: newPod("t1").pod(), new: node("fresh"), want: fwk.Queue},
		{name: "node added, exempt pod", hint: "node", pod: newPod("t1").class("a").mirror().pod(), new: node("fresh"), want: fwk.QueueSkip},
		{name: "node added for another class, marker terms", hint: "node", pod: podAMarker, new: marked("fresh", "t2_b"), want: fwk.QueueSkip},
		{name: "node added for the pod's class, marker terms", hint: "node", pod: podAMarker, new: marked("fresh", own), want: fwk.Queue},
		{name: "unmarked node added, marker terms", hint: "node", pod: podAMarker, new: node("fresh"), want: fwk.Queue},
		{name: "free node marked for another class, marker terms", hint: "node", pod: podAMarker, old: node("free"), new: marked("free", "t2_b"), want: fwk.QueueSkip},
		{name: "node marked for another class, pod without marker terms", hint: "node", pod: podA, new: marked("fresh", "t2_b"), want: fwk.Queue},
		{name: "busy node relabelled", hint: "node", pod: podA, old: node("busy"), new: node("busy"), want: fwk.QueueSkip},
		{name: "free node relabelled", hint: "node", pod: podA, old: node("free"), new: node("free"), want: fwk.Queue},
		{name: "other class deleted", hint: "assigned", pod: podA, old: podB, want: fwk.Queue},
		{name: "same class deleted", hint: "assigned", pod: podA, old: newPod("t2").class("a").on("n").pod(), want: fwk.QueueSkip},
		{name: "exempt pod deleted", hint: "assigned", pod: podA, old: newPod("t2").class("b").owned("DaemonSet", "d").on("n").pod(), want: fwk.QueueSkip},
		{name: "unclassed deleted, not strict", hint: "assigned", pod: podA, old: plain, want: fwk.QueueSkip},
		{name: "unclassed deleted, strict", args: &Args{Strict: boolp(true)}, hint: "assigned", pod: podA, old: plain, want: fwk.Queue},
		{name: "classed deleted, strict unclassed pod", args: &Args{Strict: boolp(true)}, hint: "assigned", pod: newPod("t1").pod(), old: podB, want: fwk.Queue},
		{name: "sibling replica deleted, spreading", args: &Args{SpreadReplicas: boolp(true)}, hint: "assigned",
			pod: newPod("t1").class("a").owned("StatefulSet", "db").pod(), old: sts, want: fwk.Queue},
		{name: "sibling replica deleted, no spreading", hint: "assigned",
			pod: newPod("t1").class("a").owned("StatefulSet", "db").pod(), old: sts, want: fwk.QueueSkip},
		{name: "other class relabelled to mine", hint: "assigned", pod: podA, old: podB, new: relabel(podB, "ipp-class", "a"), want: fwk.Queue},
		{name: "other class relabelled to a third", hint: "assigned", pod: podA, old: podB, new: relabel(podB, "ipp-class", "c"), want: fwk.QueueSkip},
		{name: "unrelated label change", hint: "assigned", pod: podA, old: podB, new: relabel(podB, "x", "y"), want: fwk.QueueSkip},
		{name: "pending pod changes class", hint: "target", pod: podA, old: podA, new: relabel(podA, "ipp-class", "z"), want: fwk.Queue},
		{name: "pending pod unrelated label", hint: "target", pod: podA, old: podA, new: relabel(podA, "x", "y"), want: fwk.QueueSkip},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestPlugin(t, tc.args)
			// busy holds class b; free holds nothing.
			pl.PodHandler().OnAdd(podB, false)
			var (
				got fwk.QueueingHint
				err error
			)
			// why: old/new are untyped nil where the queue passes nil (node Add, pod Delete).
			switch tc.hint {
			case "node":
				got, err = pl.isSchedulableAfterNodeChange(klog.Background(), tc.pod, tc.old, tc.new)
			case "assigned":
				got, err = pl.isSchedulableAfterAssignedPodChange(klog.Background(), tc.pod, tc.old, tc.new)
			case "target":
				got, err = pl.isSchedulableAfterTargetPodChange(klog.Background(), tc.pod, tc.old, tc.new)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("hint = %v, want %v", got, tc.want)
			}
		})
	}
}
