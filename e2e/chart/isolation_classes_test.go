package chart

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

// TestIsolationPolicyOwnerTerms: where the webhook was skipped, the policies hold a pod written
// by hand to the owner term of issue 35 item 1 in modes ipp and both: per class key {<key> In
// [class]} on the host in namespaces NotIn the class's owners — a list holding the pod's
// namespace for its own class (classed policy), exactly the InstanceClass's namespaces for a
// shared one (class-grant policy). The webhook's own output passes. Mode berth writes no terms
// and checks none.
func TestIsolationPolicyOwnerTerms(t *testing.T) {
	for _, mode := range []string{"ipp", "berth", "both"} {
		rel := "iso-" + mode
		objs, nsOf := isoRelease(t, mode, rel)
		hook := webhookConfigOf(t, objs, rel)
		hook.Nodes = isoNodes()
		hook.Classes = isoGrants()
		pe := newPolicyEval(t, objs)
		tenant := nsOf["tenant"]
		shared := isoClasses()[0].Spec.Namespaces
		for _, tc := range []struct {
			name, class string
			// owners rewrites the owner terms' NotIn list of the webhook's output (nil: kept).
			owners  []string
			refused string // part of the refusal in modes ipp and both ("" admitted)
		}{
			{name: "own class, the webhook's terms", class: "red"},
			{name: "own class, owner list without the pod's namespace", class: "red", owners: []string{nsOf["other"]},
				refused: "namespaceSelector kubernetes.io/metadata.name NotIn [the namespaces sharing the class, " + tenant + " among them]}; missing for ipp-class, berth.dev/instance-class;"},
			{name: "own class, owner list naming more namespaces", class: "red", owners: []string{tenant, nsOf["other"]}},
			{name: "shared class, the webhook's terms", class: "gold"},
			{name: "shared class, owner term as if the namespace's own", class: "gold", owners: []string{tenant},
				refused: "namespaceSelector kubernetes.io/metadata.name NotIn [" + strings.Join(shared, ", ") + "]} (the namespaces InstanceClass gold grants it to); missing for ipp-class, berth.dev/instance-class;"},
		} {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				p := isoPod(map[string]string{"ipp-class": tc.class}, nil)
				p.Namespace = tenant
				res, err := hook.Mutate(p)
				if err != nil {
					t.Fatal(err)
				}
				after := patched(t, p, res)
				if tc.owners != nil && after.Spec.Affinity.PodAntiAffinity != nil {
					for i, term := range after.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
						if term.NamespaceSelector != nil && len(term.NamespaceSelector.MatchExpressions) == 1 &&
							term.NamespaceSelector.MatchExpressions[0].Key == webhook.NamespaceNameLabel {
							after.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i].NamespaceSelector.MatchExpressions[0].Values = tc.owners
						}
					}
				}
				msg, policy, _, _ := pe.verdict(t, tenant, nil, after)
				want := tc.refused
				if mode == "berth" {
					want = ""
				}
				switch {
				case want == "" && msg != "":
					t.Fatalf("policy %s refuses: %s", policy, msg)
				case want != "" && !strings.Contains(msg, want):
					t.Fatalf("policy %s: %q, want it to contain %q", policy, msg, want)
				}
			})
		}
	}
}

// TestIsolationWebhookTermsKeepOwnersApart: the terms the webhook writes for two namespaces'
// pods of one value repel each other, and those of a shared class's namespaces do not, both
// ways (anti-affinity is checked for the incoming pod's terms and the placed pods' terms).
func TestIsolationWebhookTermsKeepOwnersApart(t *testing.T) {
	objs, nsOf := isoRelease(t, "ipp", "iso-ipp")
	hook := webhookConfigOf(t, objs, "iso-ipp")
	hook.Nodes = isoNodes()
	hook.Classes = isoGrants()
	mutated := func(ns, class string) *corev1.Pod {
		p := isoPod(map[string]string{"ipp-class": class}, nil)
		p.Namespace = ns
		res, err := hook.Mutate(p)
		if err != nil {
			t.Fatal(err)
		}
		return patched(t, p, res)
	}
	for _, tc := range []struct {
		name   string
		a, b   *corev1.Pod
		repels bool
	}{
		{"one namespace, one value", mutated(nsOf["tenant"], "red"), mutated(nsOf["tenant"], "red"), false},
		{"two namespaces, one value", mutated(nsOf["tenant"], "red"), mutated(nsOf["other"], "red"), true},
		{"shared class, two listed namespaces", mutated("iso-ipp-tenant", "gold"), mutated("iso-both-tenant", "gold"), false},
		// why: a pod of an unlisted namespace carrying gold (admitted before the InstanceClass,
		// or with the webhook skipped) has no terms of its own; the shared class's terms repel it.
		{"shared class against the same value in an unlisted namespace", mutated("iso-ipp-tenant", "gold"),
			func() *corev1.Pod {
				p := isoPod(map[string]string{"ipp-class": "gold"}, nil)
				p.Namespace = nsOf["other"]
				return p
			}(), true},
		{"two values", mutated(nsOf["tenant"], "red"), mutated(nsOf["tenant"], "blue"), true},
	} {
		if got := termsRepel(t, tc.a, tc.b) || termsRepel(t, tc.b, tc.a); got != tc.repels {
			t.Errorf("%s: repel %v, want %v", tc.name, got, tc.repels)
		}
	}
}

// termsRepel: a required anti-affinity term of a matches pod b, evaluated as InterPodAffinity
// does (label selector on b's labels; namespace selector on b's namespace's name label, or a's
// own namespace when the term names none).
func termsRepel(t *testing.T, a, b *corev1.Pod) bool {
	t.Helper()
	if a.Spec.Affinity == nil || a.Spec.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, term := range a.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			t.Fatal(err)
		}
		inNS := b.Namespace == a.Namespace
		if term.NamespaceSelector != nil {
			nsSel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
			if err != nil {
				t.Fatal(err)
			}
			inNS = nsSel.Matches(labels.Set{webhook.NamespaceNameLabel: b.Namespace})
		}
		if inNS && sel.Matches(labels.Set(b.Labels)) {
			return true
		}
	}
	return false
}
