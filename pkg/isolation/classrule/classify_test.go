package classrule

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// args are defaulted args as Parse returns them, with exemptions the tests name.
func args(mod func(*Args)) *Args {
	f := false
	a := &Args{ClassLabels: []string{"ipp-class", "berth.dev/instance-class"}, Strict: &f, SpreadReplicas: &f,
		ExemptNamespaces: []string{"kube-system"}}
	if mod != nil {
		mod(a)
	}
	return a
}

type podOpt func(*v1.Pod)

func pod(ns string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{}, Annotations: map[string]string{}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func label(k, v string) podOpt { return func(p *v1.Pod) { p.Labels[k] = v } }
func class(v string) podOpt    { return label("ipp-class", v) }
func owned(kind, name string, controller bool) podOpt {
	return func(p *v1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: kind, Name: name, UID: types.UID(kind + "-" + name), Controller: &controller})
	}
}

func TestClassify(t *testing.T) {
	shared := NewGrants()
	shared.Set("gold", []string{"red", "blue"})
	for _, tc := range []struct {
		name   string
		args   *Args
		grants *Grants
		pod    *v1.Pod
		want   PodClass
	}{
		{name: "unclassed", pod: pod("red"), want: PodClass{}},
		{name: "classed: the namespace's own class", pod: pod("red", class("gold")),
			want: PodClass{Classes: []string{"red/gold"}, NS: "red", Values: []string{"gold"}}},
		{name: "shared through a grant", grants: shared, pod: pod("blue", class("gold")),
			want: PodClass{Classes: []string{"gold (shared)"}, NS: "blue", Values: []string{"gold"}}},
		{name: "a namespace the grant does not list", grants: shared, pod: pod("green", class("gold")),
			want: PodClass{Classes: []string{"green/gold"}, NS: "green", Values: []string{"gold"}}},
		{name: "an empty value is no class", pod: pod("red", class("")), want: PodClass{}},
		{name: "two keys, one value: one class", pod: pod("red", class("a"), label("berth.dev/instance-class", "a")),
			want: PodClass{Classes: []string{"red/a"}, NS: "red", Values: []string{"a"}}},
		{name: "two values: conflict, classes sorted", pod: pod("red", class("b"), label("berth.dev/instance-class", "a")),
			want: PodClass{Classes: []string{"red/a", "red/b"}, NS: "red", Values: []string{"b", "a"},
				Conflict: "pod carries conflicting instance classes: ipp-class=b, berth.dev/instance-class=a"}},
		{name: "controller owner", pod: pod("red", class("a"), owned("ReplicaSet", "rs", true)),
			want: PodClass{Classes: []string{"red/a"}, NS: "red", Values: []string{"a"}, Owner: "ReplicaSet-rs", OwnerRef: "ReplicaSet/rs"}},
		{name: "owner that is not the controller", pod: pod("red", owned("ReplicaSet", "rs", false)), want: PodClass{}},
		{name: "exempt: mirror pod", pod: pod("red", class("a"), func(p *v1.Pod) { p.Annotations[MirrorPodAnnotation] = "x" }), want: PodClass{Exempt: true}},
		{name: "exempt: any DaemonSet reference", pod: pod("red", class("a"), owned("DaemonSet", "ds", false)), want: PodClass{Exempt: true}},
		{name: "exempt: namespace", pod: pod("kube-system", class("a")), want: PodClass{Exempt: true}},
		{name: "exempt: selector", args: args(func(a *Args) {
			a.ExemptSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"infra": "yes"}}
		}),
			pod: pod("red", class("a"), label("infra", "yes")), want: PodClass{Exempt: true}},
		{name: "selector not matching", args: args(func(a *Args) {
			a.ExemptSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"infra": "yes"}}
		}),
			pod: pod("red", class("a")), want: PodClass{Classes: []string{"red/a"}, NS: "red", Values: []string{"a"}}},
		{name: "empty selector exempts every pod", args: args(func(a *Args) { a.ExemptSelector = &metav1.LabelSelector{} }),
			pod: pod("red", class("a")), want: PodClass{Exempt: true}},
		{name: "the profile's own class labels", args: args(func(a *Args) { a.ClassLabels = []string{"team"} }),
			pod: pod("red", class("a"), label("team", "x")), want: PodClass{Classes: []string{"red/x"}, NS: "red", Values: []string{"x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.args
			if a == nil {
				a = args(nil)
			}
			if got := NewClassifier(a, tc.grants).Classify(tc.pod); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParticipates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pc     PodClass
		strict bool
		want   bool
	}{
		{"classed", PodClass{Classes: []string{"a"}}, false, true},
		{"unclassed", PodClass{}, false, false},
		{"unclassed, strict", PodClass{}, true, true},
		{"exempt, strict", PodClass{Exempt: true}, true, false},
	} {
		if got := tc.pc.Participates(tc.strict); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClassifierVerdict: the decision the rebalancer asks for, from a node's pods alone.
func TestClassifierVerdict(t *testing.T) {
	rs := owned("ReplicaSet", "rs", true)
	for _, tc := range []struct {
		name           string
		pod            *v1.Pod
		node           []*v1.Pod
		strict, spread bool
		want           string // "" fits
	}{
		{name: "empty node", pod: pod("red", class("a"))},
		{name: "own class", pod: pod("red", class("a")), node: []*v1.Pod{pod("red", class("a"))}},
		{name: "another class", pod: pod("red", class("a")), node: []*v1.Pod{pod("red", class("b"))}, want: "node holds instance class red/b"},
		{name: "another namespace's class of the same value", pod: pod("red", class("a")), node: []*v1.Pod{pod("blue", class("a"))}, want: "node holds instance class blue/a"},
		{name: "exempt pods do not count", pod: pod("red", class("a")), node: []*v1.Pod{pod("kube-system", class("b"))}},
		{name: "conflicting classes refused even on an empty node", pod: pod("red", class("a"), label("berth.dev/instance-class", "b")),
			want: "pod carries conflicting instance classes: ipp-class=a, berth.dev/instance-class=b"},
		{name: "unclassed beside a class", pod: pod("red"), node: []*v1.Pod{pod("red", class("a"))}},
		{name: "strict: unclassed beside a class", pod: pod("red"), node: []*v1.Pod{pod("red", class("a"))}, strict: true,
			want: "node holds instance class red/a (strict: pods without a class stay off classed nodes)"},
		{name: "strict: classed beside unclassed", pod: pod("red", class("a")), node: []*v1.Pod{pod("red"), pod("red")}, strict: true,
			want: "node holds 2 pod(s) without an instance class (strict)"},
		{name: "strict: an exempt pod fits anywhere", pod: pod("kube-system"), node: []*v1.Pod{pod("red", class("a"))}, strict: true},
		{name: "spread: a replica of the same controller", pod: pod("red", class("a"), rs), node: []*v1.Pod{pod("red", class("a"), rs)}, spread: true,
			want: "node already holds a replica of ReplicaSet/rs (spreadReplicas)"},
		{name: "no spread: replicas together", pod: pod("red", class("a"), rs), node: []*v1.Pod{pod("red", class("a"), rs)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, refuse := NewClassifier(args(nil), nil).Verdict(tc.pod, tc.node, tc.strict, tc.spread)
			if reason != tc.want || refuse != (tc.want != "") {
				t.Fatalf("got %q (refuse %v), want %q", reason, refuse, tc.want)
			}
		})
	}
}
