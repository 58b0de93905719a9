package instanceisolation

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

type reservation struct {
	pod       *v1.Pod
	node      string
	unreserve bool
}

func TestFilter(t *testing.T) {
	strict := &Args{Strict: boolp(true)}
	spread := &Args{SpreadReplicas: boolp(true)}
	cases := []struct {
		name     string
		args     *Args
		existing []*v1.Pod // delivered through the pod handler (bound pods)
		deleted  []*v1.Pod // delivered as deletes after existing
		reserved []reservation
		// snapshotOnly are pods the snapshot's NodeInfo holds but this index has not seen
		// (another profile's reservation, a binding the handler has not processed yet).
		snapshotOnly []*v1.Pod
		// indexOnly are pods the index has seen bound but the snapshot does not hold yet.
		indexOnly []*v1.Pod
		pod       *v1.Pod
		// want is "" for a fit, else a substring of the UnschedulableAndUnresolvable reason.
		want string
	}{
		{name: "empty node", pod: newPod("t1").class("a").pod()},
		{name: "same class, other namespace", existing: []*v1.Pod{newPod("t2").class("a").on("n1").pod()}, pod: newPod("t1").class("a").pod()},
		{name: "other class in another namespace", existing: []*v1.Pod{newPod("t2").class("b").on("n1").pod()},
			pod: newPod("t1").class("a").pod(), want: "node holds instance class b"},
		{name: "other class on another node only", existing: []*v1.Pod{newPod("t1").class("b").on("n2").pod()}, pod: newPod("t1").class("a").pod()},
		{name: "DaemonSet pod of another class is exempt", existing: []*v1.Pod{newPod("kube-system").class("b").owned("DaemonSet", "agent").on("n1").pod()},
			pod: newPod("t1").class("a").pod()},
		{name: "DaemonSet pod without class is exempt even in strict", args: strict,
			existing: []*v1.Pod{newPod("kube-system").owned("DaemonSet", "agent").on("n1").pod()}, pod: newPod("t1").class("a").pod()},
		{name: "mirror pod of another class is exempt", existing: []*v1.Pod{newPod("kube-system").class("b").mirror().on("n1").pod()},
			pod: newPod("t1").class("a").pod()},
		{name: "exempt namespace", args: &Args{ExemptNamespaces: []string{"infra"}, Strict: boolp(true)},
			existing: []*v1.Pod{newPod("infra").class("b").on("n1").pod(), newPod("infra").on("n1").pod()}, pod: newPod("t1").class("a").pod()},
		{name: "exempt selector", args: &Args{ExemptSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"berth.dev/isolation": "exempt"}}},
			existing: []*v1.Pod{newPod("t2").class("b").label("berth.dev/isolation", "exempt").on("n1").pod()}, pod: newPod("t1").class("a").pod()},
		{name: "exempt selector does not match", args: &Args{ExemptSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"berth.dev/isolation": "exempt"}}},
			existing: []*v1.Pod{newPod("t2").class("b").label("berth.dev/isolation", "no").on("n1").pod()}, pod: newPod("t1").class("a").pod(), want: "node holds instance class b"},
		{name: "incoming pod in an exempt namespace goes anywhere", args: &Args{ExemptNamespaces: []string{"infra"}},
			existing: []*v1.Pod{newPod("t2").class("b").on("n1").pod()}, pod: newPod("infra").class("a").pod()},
		{name: "assumed pod of another class (Reserve then Filter)", reserved: []reservation{{pod: newPod("t2").class("b").pod(), node: "n1"}},
			pod: newPod("t1").class("a").pod(), want: "node holds instance class b"},
		{name: "another profile's reservation, only in the snapshot", snapshotOnly: []*v1.Pod{newPod("t2").class("b").on("n1").pod()},
			pod: newPod("t1").class("a").pod(), want: "node holds instance class b"},
		{name: "snapshot-only exempt pod", snapshotOnly: []*v1.Pod{newPod("t2").class("b").mirror().on("n1").pod()},
			existing: []*v1.Pod{newPod("t2").class("a").on("n1").pod()}, pod: newPod("t1").class("a").pod()},
		{name: "snapshot-only replica, spreading", args: spread, snapshotOnly: []*v1.Pod{newPod("t1").class("a").owned("Job", "j").on("n1").pod()},
			pod: newPod("t1").class("a").owned("Job", "j").pod(), want: "replica of Job/j"},
		{name: "index-only pod of another class, empty snapshot: the snapshot decides", indexOnly: []*v1.Pod{newPod("t2").class("b").on("n1").pod()},
			pod: newPod("t1").class("a").pod()},
		{name: "index-only unclassed pod, strict, empty snapshot", args: strict, indexOnly: []*v1.Pod{newPod("t2").on("n1").pod()},
			pod: newPod("t1").class("a").pod()},
		{name: "index-only pod of another class beside a snapshot pod", indexOnly: []*v1.Pod{newPod("t2").class("b").on("n1").pod()},
			existing: []*v1.Pod{newPod("t3").class("a").on("n1").pod()}, pod: newPod("t1").class("a").pod()},
		{name: "assumed pod unreserved", reserved: []reservation{{pod: newPod("t2").class("b").pod(), node: "n1", unreserve: true}},
			pod: newPod("t1").class("a").pod()},
		{name: "terminated pod does not count", existing: []*v1.Pod{newPod("t2").class("b").on("n1").phase(v1.PodSucceeded).pod()},
			pod: newPod("t1").class("a").pod()},
		{name: "deleted pod does not count", existing: []*v1.Pod{delPod}, deleted: []*v1.Pod{delPod}, pod: newPod("t1").class("a").pod()},
		{name: "unclassed pod on node, not strict", existing: []*v1.Pod{newPod("t2").on("n1").pod()}, pod: newPod("t1").class("a").pod()},
		{name: "unclassed pod on node, strict", args: strict, existing: []*v1.Pod{newPod("t2").on("n1").pod(), newPod("t3").on("n1").pod()},
			pod: newPod("t1").class("a").pod(), want: "node holds 2 pod(s) without an instance class (strict)"},
		{name: "unclassed incoming on classed node, not strict", existing: []*v1.Pod{newPod("t2").class("a").on("n1").pod()}, pod: newPod("t1").pod()},
		{name: "unclassed incoming on classed node, strict", args: strict, existing: []*v1.Pod{newPod("t2").class("a").on("n1").pod()},
			pod: newPod("t1").pod(), want: "node holds instance class a (shared) (strict: pods without a class stay off classed nodes)"},
		{name: "unclassed incoming on unclassed node, strict", args: strict, existing: []*v1.Pod{newPod("t2").on("n1").pod()}, pod: newPod("t1").pod()},
		{name: "spreading: replica of the same StatefulSet", args: spread,
			existing: []*v1.Pod{newPod("t1").class("a").owned("StatefulSet", "db").on("n1").pod()},
			pod:      newPod("t1").class("a").owned("StatefulSet", "db").pod(), want: "node already holds a replica of StatefulSet/db (spreadReplicas)"},
		{name: "spreading: assumed replica of the same Job", args: spread,
			reserved: []reservation{{pod: newPod("t1").class("a").owned("Job", "j").pod(), node: "n1"}},
			pod:      newPod("t1").class("a").owned("Job", "j").pod(), want: "replica of Job/j"},
		{name: "spreading: another StatefulSet of the class", args: spread,
			existing: []*v1.Pod{newPod("t1").class("a").owned("StatefulSet", "db").on("n1").pod()},
			pod:      newPod("t1").class("a").owned("StatefulSet", "cache").pod()},
		{name: "no spreading: same StatefulSet packs",
			existing: []*v1.Pod{newPod("t1").class("a").owned("StatefulSet", "db").on("n1").pod()},
			pod:      newPod("t1").class("a").owned("StatefulSet", "db").pod()},
		{name: "conflicting labels on the incoming pod", pod: newPod("t1").class("a").label("berth.dev/instance-class", "b").pod(),
			want: "pod carries conflicting instance classes: ipp-class=a, berth.dev/instance-class=b"},
		{name: "both keys, same value", existing: []*v1.Pod{newPod("t2").class("a").on("n1").pod()},
			pod: newPod("t1").class("a").label("berth.dev/instance-class", "a").pod()},
		{name: "Berth's key against IPP's", existing: []*v1.Pod{newPod("t2").label("berth.dev/instance-class", "b").on("n1").pod()},
			pod: newPod("t1").class("a").pod(), want: "node holds instance class b"},
		{name: "placed pod with conflicting labels keeps both classes off", existing: []*v1.Pod{newPod("t2").class("a").label("berth.dev/instance-class", "b").on("n1").pod()},
			pod: newPod("t1").class("a").pod(), want: "node holds instance class b"},
		{name: "empty class value is no class", args: strict, existing: []*v1.Pod{newPod("t2").class("").on("n1").pod()},
			pod: newPod("t1").class("a").pod(), want: "without an instance class"},
		{name: "custom class label ignores ipp-class", args: &Args{ClassLabels: []string{"tenant"}},
			existing: []*v1.Pod{newPod("t2").class("b").on("n1").pod()}, pod: newPod("t1").label("tenant", "a").pod()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestPlugin(t, tc.args)
			h := pl.PodHandler()
			// snap is what the scheduler's snapshot of n1 holds after the same events.
			snap := map[*v1.Pod]bool{}
			for _, p := range tc.existing {
				h.OnAdd(p, false)
				snap[p] = p.Spec.NodeName == "n1" && p.Status.Phase != v1.PodSucceeded
			}
			for _, p := range tc.deleted {
				h.OnDelete(p)
				delete(snap, p)
			}
			for _, p := range tc.indexOnly {
				h.OnAdd(p, false)
			}
			ctx := context.Background()
			for _, r := range tc.reserved {
				p := r.pod.DeepCopy()
				p.Spec.NodeName = r.node
				if s := pl.Reserve(ctx, framework.NewCycleState(), p, r.node); !s.IsSuccess() {
					t.Fatal(s)
				}
				snap[p] = r.node == "n1"
				if r.unreserve {
					pl.Unreserve(ctx, framework.NewCycleState(), p, r.node)
					delete(snap, p)
				}
			}
			for _, p := range tc.snapshotOnly {
				snap[p] = true
			}
			var onNode []*v1.Pod
			for p, ok := range snap {
				if ok {
					onNode = append(onNode, p)
				}
			}
			s := filter(pl, tc.pod, "n1", onNode...)
			if tc.want == "" {
				if !s.IsSuccess() {
					t.Fatalf("refused: %v", s)
				}
				return
			}
			if s.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(s.Message(), tc.want) {
				t.Fatalf("status %v %q, want UnschedulableAndUnresolvable containing %q", s.Code(), s.Message(), tc.want)
			}
		})
	}
}

var delPod = newPod("t2").class("b").on("n1").pod()

// TestNominatedAndVictims: the cycle view includes nominated pods (AddPod) and preemption
// victims (RemovePod) the framework hands the plugin, without touching the shared index.
func TestNominatedAndVictims(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, nil)
	victim := newPod("t2").class("b").on("n1").pod()
	pl.PodHandler().OnAdd(victim, false)
	pod := newPod("t1").class("a").pod()

	cs := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	// The framework changes a copy of the NodeInfo and tells the plugin, as below.
	ni := nodeInfo("n1", victim)
	if s := pl.Filter(ctx, cs, pod, ni); s.IsSuccess() {
		t.Fatal("class b on the node must refuse class a")
	}
	pi, _ := framework.NewPodInfo(victim)
	withVictimGone := cs.Clone()
	niGone := nodeInfo("n1")
	if s := pl.RemovePod(ctx, withVictimGone, pod, pi, niGone); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := pl.Filter(ctx, withVictimGone, pod, niGone); !s.IsSuccess() {
		t.Fatalf("without the victim the node fits: %v", s)
	}
	nomPod := newPod("t3").class("c").pod()
	nominated, _ := framework.NewPodInfo(nomPod)
	withNominated := withVictimGone.Clone()
	niNom := nodeInfo("n1", nomPod)
	if s := pl.AddPod(ctx, withNominated, pod, nominated, niNom); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := pl.Filter(ctx, withNominated, pod, niNom); s.IsSuccess() || !strings.Contains(s.Message(), "instance class c") {
		t.Fatalf("a nominated class c pod must refuse class a: %v", s)
	}
	// why: Clone must copy the delta, or the nominated pod would leak into the parent state.
	if s := pl.Filter(ctx, withVictimGone, pod, niGone); !s.IsSuccess() {
		t.Fatalf("the parent state changed through a clone: %v", s)
	}
	if got := pl.Index().Summary()["n1"].Classes[classmarker.SharedClass("b")]; got != 1 {
		t.Fatalf("cycle deltas leaked into the index: class b count %d", got)
	}
	// The clones' deltas are theirs: the cycle's own state still sees the victim.
	if s := pl.Filter(ctx, cs, pod, ni); s.IsSuccess() {
		t.Fatal("after filtering clones, the cycle's own state lost the victim")
	}
}

// TestFilterReadsItsOwnCycle: Filter and Score must read the state of the CycleState they are
// given, not whichever cycle wrote last (the plugin keeps the last one at hand).
func TestFilterReadsItsOwnCycle(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, nil)
	holder := newPod("t2").class("b").on("n1").pod()
	pl.PodHandler().OnAdd(holder, false)
	ni := nodeInfo("n1", holder)
	podA, podB := newPod("t1").class("a").pod(), newPod("t1").class("b").pod()
	csA, csB := framework.NewCycleState(), framework.NewCycleState()
	for _, c := range []struct {
		cs  fwk.CycleState
		pod *v1.Pod
	}{{csA, podA}, {csB, podB}} {
		if _, s := pl.PreFilter(ctx, c.cs, c.pod, nil); !s.IsSuccess() {
			t.Fatal(s)
		}
	}
	tests := []struct {
		name   string
		cs     fwk.CycleState
		pod    *v1.Pod
		fits   bool
		scores int64
	}{
		{"older cycle, class a", csA, podA, false, 0},
		{"last cycle, class b", csB, podB, true, fwk.MaxNodeScore},
		{"clone of the older cycle", csA.Clone(), podA, false, 0},
	}
	for _, tt := range tests {
		if s := pl.Filter(ctx, tt.cs, tt.pod, ni); s.IsSuccess() != tt.fits {
			t.Errorf("%s: Filter = %v, want fits=%v", tt.name, s, tt.fits)
		}
		if got, s := pl.Score(ctx, tt.cs, tt.pod, ni); !s.IsSuccess() || got != tt.scores {
			t.Errorf("%s: Score = %d, %v; want %d", tt.name, got, s, tt.scores)
		}
	}
}

func TestScorePacksClasses(t *testing.T) {
	ctx := context.Background()
	pl := newTestPlugin(t, nil)
	h := pl.PodHandler()
	h.OnAdd(newPod("t1").class("a").on("a-node").pod(), false)
	h.OnAdd(newPod("t1").on("plain-node").pod(), false)
	cases := []struct {
		pod   *v1.Pod
		node  string
		score int64
	}{
		{newPod("t2").class("a").pod(), "a-node", 100},
		{newPod("t2").class("a").pod(), "empty-node", 0},
		{newPod("t2").class("a").pod(), "plain-node", 0},
		{newPod("t2").pod(), "plain-node", 100},
		{newPod("t2").pod(), "empty-node", 100},
		{newPod("t2").pod(), "a-node", 0},
	}
	for _, tc := range cases {
		cs := framework.NewCycleState()
		_, _ = pl.PreFilter(ctx, cs, tc.pod, nil)
		if s := pl.PreScore(ctx, cs, tc.pod, nil); !s.IsSuccess() {
			t.Fatalf("%s: PreScore %v", tc.node, s)
		}
		got, s := pl.Score(ctx, cs, tc.pod, nodeInfo(tc.node))
		if !s.IsSuccess() || got != tc.score {
			t.Errorf("pod class %q on %s: score %d (%v), want %d", tc.pod.Labels["ipp-class"], tc.node, got, s, tc.score)
		}
	}
	exempt := newPod("t1").class("a").owned("DaemonSet", "ds").pod()
	if s := pl.PreScore(ctx, framework.NewCycleState(), exempt, nil); !s.IsSkip() {
		t.Fatalf("exempt pod PreScore = %v, want Skip", s)
	}
}

func TestSignPod(t *testing.T) {
	pl := newTestPlugin(t, &Args{SpreadReplicas: boolp(true)})
	sig := func(p *v1.Pod) any {
		f, s := pl.SignPod(context.Background(), p)
		if !s.IsSuccess() || len(f) != 1 || f[0].Key != SignerName {
			t.Fatalf("SignPod = %v %v", f, s)
		}
		return f[0].Value
	}
	a1 := sig(newPod("t1").class("a").owned("ReplicaSet", "rs").label("x", "1").pod())
	a2 := sig(newPod("t9").class("a").owned("ReplicaSet", "rs").label("x", "2").pod())
	if a1.(signature).Owner == "" || !equalSig(a1, a2) {
		t.Fatalf("same class and owner must sign alike: %v %v", a1, a2)
	}
	for _, other := range []*v1.Pod{
		newPod("t1").class("b").owned("ReplicaSet", "rs").pod(),
		newPod("t1").class("a").owned("ReplicaSet", "rs2").pod(),
		newPod("t1").class("a").owned("ReplicaSet", "rs").owned("DaemonSet", "d").pod(),
	} {
		if equalSig(a1, sig(other)) {
			t.Errorf("pod %v signs like class a of rs", other.Labels)
		}
	}
}

func equalSig(a, b any) bool {
	x, y := a.(signature), b.(signature)
	return x.Exempt == y.Exempt && x.Owner == y.Owner && equalStrings(x.Classes, y.Classes)
}
