package chart

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

func renderValues(t *testing.T, values string) (*Rendered, error) {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &v); err != nil {
		t.Fatal(err)
	}
	return Render("berth", "berth-system", v)
}

func objectsOf(t *testing.T, r *Rendered) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

const isoBerth = `scheduler: {plugins: {instanceIsolation: {enabled: true}}}
isolation: {enabled: true}`

// TestIsolationWebhookValues: isolation.enabled renders the webhook Service, configuration,
// policy and the operator's flags and port; the operator may touch exactly its own webhook
// configuration and Secret (resourceNames), nothing else of either kind; nothing is rendered
// while disabled.
func TestIsolationWebhookValues(t *testing.T) {
	objs := objectsOf(t, render(t, "default"))
	for _, o := range objs {
		if strings.Contains(o.GetName(), "isolation") || o.GetKind() == "MutatingWebhookConfiguration" {
			t.Errorf("isolation disabled by default, yet %s %s rendered", o.GetKind(), o.GetName())
		}
	}

	r, err := renderValues(t, isoBerth)
	if err != nil {
		t.Fatal(err)
	}
	objs = objectsOf(t, r)
	mwc := find(objs, "MutatingWebhookConfiguration", "berth-instance-isolation")
	if mwc == nil {
		t.Fatal("no MutatingWebhookConfiguration")
	}
	hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	h := hooks[0].(map[string]any)
	if h["failurePolicy"] != "Fail" || h["sideEffects"] != "None" || h["reinvocationPolicy"] != "IfNeeded" {
		t.Errorf("webhook %v", h)
	}
	if v, _, _ := unstructured.NestedStringSlice(h, "admissionReviewVersions"); !slices.Equal(v, []string{"v1"}) {
		t.Errorf("admissionReviewVersions %v, want [v1] only", v)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(h, "clientConfig", "caBundle"); ok {
		t.Errorf("the chart must not own caBundle (an upgrade would wipe the operator's)")
	}
	sel, _, _ := unstructured.NestedSlice(h, "namespaceSelector", "matchExpressions")
	if vals := sel[0].(map[string]any)["values"]; !strings.Contains(strings.Join(toStrings(vals), ","), "berth-system,kube-system") {
		t.Errorf("namespaceSelector does not exempt the release namespace and kube-system: %v", sel)
	}
	for _, want := range []struct{ kind, name string }{
		{"Service", "berth-isolation-webhook"}, {"Secret", "berth-isolation-webhook-tls"},
		{"ValidatingAdmissionPolicy", "berth-instance-isolation"}, {"ValidatingAdmissionPolicyBinding", "berth-instance-isolation"},
		{"ValidatingAdmissionPolicy", "berth-instance-isolation-fixed-class"}, {"ValidatingAdmissionPolicyBinding", "berth-instance-isolation-fixed-class"},
		{"ValidatingAdmissionPolicy", "berth-instance-isolation-pool-access"}, {"ValidatingAdmissionPolicyBinding", "berth-instance-isolation-pool-access"},
	} {
		if find(objs, want.kind, want.name) == nil {
			t.Errorf("no %s %s", want.kind, want.name)
		}
	}
	// The class is fixed after creation through every pod subresource that can change labels.
	fixed := find(objs, "ValidatingAdmissionPolicy", "berth-instance-isolation-fixed-class")
	if fixed != nil {
		rules, _, _ := unstructured.NestedSlice(fixed.Object, "spec", "matchConstraints", "resourceRules")
		rm := rules[0].(map[string]any)
		if ops, res := toStrings(rm["operations"]), toStrings(rm["resources"]); !slices.Equal(ops, []string{"UPDATE"}) || !slices.Contains(res, "pods") || !slices.Contains(res, "pods/status") {
			t.Errorf("fixed-class policy matches %v on %v, want UPDATE on pods and pods/status", ops, res)
		}
		if b := find(objs, "ValidatingAdmissionPolicyBinding", "berth-instance-isolation-fixed-class"); b == nil {
			t.Errorf("fixed-class policy without a binding")
		} else if acts, _, _ := unstructured.NestedStringSlice(b.Object, "spec", "validationActions"); !slices.Equal(acts, []string{"Deny"}) {
			t.Errorf("fixed-class binding actions %v, want [Deny]", acts)
		}
	}
	// Least privilege: webhook configurations and secrets only by name.
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, ru := range rules {
			rm := ru.(map[string]any)
			res := toStrings(rm["resources"])
			if slices.Contains(res, "mutatingwebhookconfigurations") || slices.Contains(res, "secrets") {
				names := toStrings(rm["resourceNames"])
				if len(names) != 1 || (names[0] != "berth-instance-isolation" && names[0] != "berth-isolation-webhook-tls") {
					t.Errorf("%s %s grants %v on %v to names %v", o.GetKind(), o.GetName(), rm["verbs"], res, names)
				}
				if verbs := toStrings(rm["verbs"]); slices.Contains(verbs, "list") || slices.Contains(verbs, "watch") || slices.Contains(verbs, "create") || slices.Contains(verbs, "delete") {
					t.Errorf("%s %s: verbs %v", o.GetKind(), o.GetName(), verbs)
				}
			}
		}
	}
	dep := find(objs, "Deployment", "berth-operator")
	args, _ := containerField(dep, "args")
	joined := strings.Join(toStrings(args), " ")
	// DaemonSet pods are judged like any other pod (issue 20 item 5): no policy skips them.
	for _, o := range objs {
		if o.GetKind() != "ValidatingAdmissionPolicy" {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(o.Object, "spec", "matchConditions")
		for _, c := range conds {
			if e := c.(map[string]any)["expression"].(string); strings.Contains(e, "!object.metadata.ownerReferences.exists(o, o.kind == 'DaemonSet')") {
				t.Errorf("policy %s skips DaemonSet pods: matchCondition %q", o.GetName(), e)
			}
		}
	}
	for _, want := range []string{"--isolation-webhook ", "--isolation-mode=berth", "--isolation-exempt-namespaces=berth-system,kube-system", "--isolation-pool-label=ipp=true", "--isolation-pool-taint=ipp=true:NoSchedule",
		"--isolation-webhook-configuration=berth-instance-isolation", "--isolation-webhook-secret=berth-system/berth-isolation-webhook-tls",
		"--isolation-webhook-cert-hosts=berth-isolation-webhook.berth-system.svc"} {
		if !strings.Contains(joined+" ", want) {
			t.Errorf("operator args lack %q: %s", want, joined)
		}
	}

	// isolation.exemptNamespaces: the webhook's selector, every policy's and the webhook's own
	// list say the same; the release namespace is always in it.
	r, err = renderValues(t, isoBerth+`
isolation: {enabled: true, exemptNamespaces: [monitoring, kube-system]}`)
	if err != nil {
		t.Fatal(err)
	}
	objs = objectsOf(t, r)
	want := []string{"berth-system", "monitoring", "kube-system"}
	for _, o := range objs {
		var sel []any
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			sel, _, _ = unstructured.NestedSlice(hooks[0].(map[string]any), "namespaceSelector", "matchExpressions")
		case "ValidatingAdmissionPolicy":
			if !strings.HasPrefix(o.GetName(), "berth-instance-isolation") {
				continue
			}
			sel, _, _ = unstructured.NestedSlice(o.Object, "spec", "matchConstraints", "namespaceSelector", "matchExpressions")
		default:
			continue
		}
		if len(sel) != 1 || sel[0].(map[string]any)["operator"] != "NotIn" || !slices.Equal(toStrings(sel[0].(map[string]any)["values"]), want) {
			t.Errorf("%s %s: namespaceSelector %v, want NotIn %v", o.GetKind(), o.GetName(), sel, want)
		}
	}
	if hook := webhookConfigOf(t, objs, "berth"); !slices.Equal(hook.ExemptNamespaces, want) {
		t.Errorf("the webhook exempts %v, want %v", hook.ExemptNamespaces, want)
	}

	// The plugin's strict mode changes what the scheduler does with unclassed pods, not who may
	// reach the pool: the admission objects are the same, so the rules above hold in it too.
	for _, mode := range []string{"ipp", "berth", "both"} {
		admission := func(strict bool) string {
			r, err := renderValues(t, fmt.Sprintf("scheduler: {plugins: {instanceIsolation: {enabled: true, args: {strict: %v}}}}\nisolation: {enabled: true, mode: %s}", strict, mode))
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, o := range objectsOf(t, r) {
				if k := o.GetKind(); k == "MutatingWebhookConfiguration" || strings.HasPrefix(k, "ValidatingAdmissionPolicy") {
					b, _ := json.Marshal(o.Object)
					out = append(out, string(b))
				}
			}
			return strings.Join(out, "\n")
		}
		if plain, strict := admission(false), admission(true); plain != strict || !strings.Contains(strict, "-pool-access") {
			t.Errorf("mode %s: the admission objects differ with the plugin's strict mode, or lack the pool-access policy", mode)
		}
	}

	// cert-manager: no Secret or webhook-configuration RBAC, a Certificate and the injector annotation.
	r, err = renderValues(t, isoBerth+`
isolation: {enabled: true, certs: {certManager: {enabled: true}}}`)
	if err != nil {
		t.Fatal(err)
	}
	objs = objectsOf(t, r)
	if find(objs, "Certificate", "berth-isolation-webhook") == nil || find(objs, "Secret", "berth-isolation-webhook-tls") != nil ||
		find(objs, "ClusterRole", "berth-operator-isolation-webhook") != nil {
		t.Errorf("cert-manager mode: want a Certificate, no Secret and no webhook-configuration RBAC")
	}
	if a := find(objs, "MutatingWebhookConfiguration", "berth-instance-isolation").GetAnnotations()["cert-manager.io/inject-ca-from"]; a != "berth-system/berth-isolation-webhook" {
		t.Errorf("inject-ca-from %q", a)
	}
	args, _ = containerField(find(objs, "Deployment", "berth-operator"), "args")
	if !slices.Contains(toStrings(args), "--isolation-webhook-cert-management=external") {
		t.Errorf("operator not told the certificate is external: %v", args)
	}
}

// TestIsolationWebhookRefusesBadValues: the schema and the template name the bad value.
func TestIsolationWebhookRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ values, msg string }{
		{`isolation: {enabled: true, mode: strict}`, "/isolation/mode"},
		{`isolation: {failurePolicy: Never}`, "/isolation/failurePolicy"},
		{`isolation: {pool: {label: {key: ipp, value: "not valid"}}}`, "/isolation/pool/label/value"},
		{`isolation: {pool: {taint: {key: ipp, value: "true", effect: Sometimes}}}`, "/isolation/pool/taint/effect"},
		{`isolation: {classLabels: ["a b"]}`, "/isolation/classLabels/0"},
		{`isolation: {certs: {certValidity: 1year}}`, "/isolation/certs/certValidity"},
		{`isolation: {timeoutSeconds: 60}`, "/isolation/timeoutSeconds"},
		{`isolation: {exemptNamespaces: [kube-system, Kube_System]}`, "/isolation/exemptNamespaces/1"},
		{`isolation: {exemptNamespaces: [kube-system, kube-system]}`, "/isolation/exemptNamespaces"},
		{`isolation: {enabled: true}`, "isolation.mode berth: InstanceIsolation enforces it"},
		{`isolation: {enabled: true, mode: both}`, "isolation.mode both: InstanceIsolation enforces it"},
		{`operator: {enabled: false}
isolation: {enabled: true, mode: ipp}`, "set operator.enabled"},
		{isoBerth + `
isolation: {enabled: true, classLabels: [team]}
scheduler: {plugins: {instanceIsolation: {enabled: true, args: {classLabels: [tenant]}}}}`, "must read the same labels"},
	} {
		_, err := renderValues(t, tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an error naming %q", tc.values, err, tc.msg)
		}
	}
	// Mode ipp needs no Berth plugin.
	if _, err := renderValues(t, `isolation: {enabled: true, mode: ipp}`); err != nil {
		t.Errorf("mode ipp: %v", err)
	}
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func containerField(dep *unstructured.Unstructured, field string) (any, bool) {
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return nil, false
	}
	v, ok := cs[0].(map[string]any)[field]
	return v, ok
}

// webhookConfigOf is what the operator's webhook runs with: the chart's --isolation-* operator
// arguments parsed by the operator's own flag code.
func webhookConfigOf(t *testing.T, objs []*unstructured.Unstructured, release string) webhook.Config {
	t.Helper()
	dep := find(objs, "Deployment", release+"-operator")
	if dep == nil {
		t.Fatalf("no Deployment %s-operator", release)
	}
	args, _ := containerField(dep, "args")
	var iso []string
	for _, a := range toStrings(args) {
		if strings.HasPrefix(a, "--isolation") {
			iso = append(iso, a)
		}
	}
	fs := flag.NewFlagSet("operator", flag.ContinueOnError)
	f := webhook.BindFlags(fs)
	if err := fs.Parse(iso); err != nil {
		t.Fatalf("the operator would not start with %v: %v", iso, err)
	}
	o, err := f.Options()
	if err != nil {
		t.Fatalf("the operator would not start with %v: %v", iso, err)
	}
	return o.Config
}

// isoCase is one pod put to the webhook and the policies. ns is "tenant", "release" or
// "exempt" (the value set's extra exempt namespace), filled in per release. refused says what
// the test expects of both: "" admitted (after the webhook's patch, for a classed pod), else a
// part of the refusal.
type isoCase struct {
	name, ns string
	pod      *corev1.Pod
	refused  string
}

var (
	isoPoolTol = corev1.Toleration{Key: "ipp", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	isoDSRef   = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "attack", UID: "2d6f7c1e-3b7a-4d0e-9c5b-8a1f0e2d4c6b", Controller: ptr.To(true)}
)

func isoPod(labels map[string]string, mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10.1"}}}}
	if mod != nil {
		mod(p)
	}
	return p
}

func nodeTerms(terms ...[]corev1.NodeSelectorRequirement) *corev1.Affinity {
	var ts []corev1.NodeSelectorTerm
	for _, e := range terms {
		ts = append(ts, corev1.NodeSelectorTerm{MatchExpressions: e})
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts}}}
}

// isoCases: the incident of issue 20 item 5 (a tenant's DaemonSet labelled ipp-class: red,
// tolerating the pool taint, selecting ipp=true), its unclassed variants, what must still pass,
// and the exemptions. Refusals by either policy come first: on the API server they are retried
// until the new bindings take effect, so no admitted case after them passes only because a
// policy was not in force yet.
func isoCases() []isoCase {
	red := map[string]string{"ipp-class": "red"}
	incident := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{isoPoolTol}
		p.Spec.NodeSelector = map[string]string{"ipp": "true"}
		p.OwnerReferences = []metav1.OwnerReference{isoDSRef}
	}
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	gold := map[string]string{"ipp-class": "gold"}
	return []isoCase{
		// Issue 35 item 1: class gold is shared by the tenant namespaces (isoClasses); another
		// namespace carrying it is refused, naming the grant to ask for.
		{name: "class granted to other namespaces only", ns: "other", pod: isoPod(gold, nil),
			refused: "metadata.labels[ipp-class]: instance class gold belongs to the namespaces InstanceClass gold grants it to (iso-ipp-tenant, iso-berth-tenant, iso-both-tenant), not to iso-"},
		{name: "class granted to other namespaces only, under Berth's key", ns: "other", pod: isoPod(map[string]string{"berth.dev/instance-class": "gold"}, nil),
			refused: "metadata.labels[berth.dev/instance-class]: instance class gold belongs to the namespaces InstanceClass gold grants it to"},
		// Issue 37: the autoscaler marker. A pod selecting another class's marker would make an
		// autoscaler place it on (or believe it fits on) that class's node.
		{name: "classed pod selecting another namespace's class marker", ns: "tenant", pod: isoPod(red, func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{classmarker.Key: "blue_red"}
		}), refused: "spec.nodeSelector[" + classmarker.Key + "]: selects the isolation marker " + classmarker.Key + "=blue_red; a pod of instance class red may select the marker"},
		{name: "shared class requiring its own and another class's marker", ns: "tenant", pod: isoPod(gold, func(p *corev1.Pod) {
			p.Spec.Affinity = nodeTerms([]corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}},
				[]corev1.NodeSelectorRequirement{{Key: classmarker.Key, Operator: corev1.NodeSelectorOpIn, Values: []string{"gold", "red_x"}}})
		}), refused: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[0]: selects the isolation marker " +
			classmarker.Key + " In [gold, red_x]; a pod of instance class gold may select the marker " + classmarker.Key + " only with its own class's value"},
		{name: "unclassed pod preferring marked nodes", ns: "tenant", pod: isoPod(nil, func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: classmarker.Key, Operator: corev1.NodeSelectorOpExists}}}}}}}
		}), refused: "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]: selects the isolation marker " +
			classmarker.Key + " Exists; only pods of an instance class (label ipp-class or berth.dev/instance-class) may select the marker"},
		{name: "the incident: DaemonSet pod of class red on the pool", ns: "tenant", pod: isoPod(red, incident),
			refused: "metadata.ownerReferences[0]: pod of instance class red is owned by DaemonSet attack; only pods in an exempt namespace"},
		{name: "classed pod naming a DaemonSet owner as its second reference", ns: "tenant", pod: isoPod(red, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed"}, isoDSRef}
		}), refused: "metadata.ownerReferences[1]: pod of instance class red is owned by DaemonSet attack"},
		{name: "unclassed DaemonSet pod tolerating the pool taint", ns: "tenant", pod: isoPod(nil, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{isoPoolTol}
			p.OwnerReferences = []metav1.OwnerReference{isoDSRef}
		}), refused: "spec.tolerations[0]: tolerates the isolation pool taint ipp=true:NoSchedule; only pods of an instance class"},
		{name: "unclassed pod tolerating every taint", ns: "tenant", pod: isoPod(nil, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{gpu, {Operator: corev1.TolerationOpExists}}
		}), refused: "spec.tolerations[1]: tolerates the isolation pool taint"},
		{name: "empty class with the pool's nodeSelector", ns: "tenant", pod: isoPod(map[string]string{"ipp-class": ""}, func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"ipp": "true"}
		}), refused: "spec.nodeSelector[ipp]: selects the isolation pool's nodes ipp=true"},
		{name: "unclassed, tolerating and requiring the pool in its second term", ns: "tenant", pod: isoPod(nil, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "ipp", Operator: corev1.TolerationOpExists}}
			p.Spec.Affinity = nodeTerms([]corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}},
				[]corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}, {Key: "ipp", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"false"}}})
		}), refused: "spec.tolerations[0]: tolerates the isolation pool taint ipp=true:NoSchedule; " +
			"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[1]: selects the isolation pool's nodes ipp=true; only pods"},
		{name: "unclassed pod staying off the pool", ns: "tenant", pod: isoPod(map[string]string{"app": "web"}, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{gpu, {Key: "ipp", Operator: corev1.TolerationOpEqual, Value: "false"}}
			p.Spec.NodeSelector = map[string]string{"ipp": "false"}
			p.Spec.Affinity = nodeTerms([]corev1.NodeSelectorRequirement{{Key: "ipp", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}}},
				[]corev1.NodeSelectorRequirement{{Key: "ipp", Operator: corev1.NodeSelectorOpDoesNotExist}})
		})},
		{name: "classed pod as a user writes it (the webhook adds the constraint)", ns: "tenant", pod: isoPod(red, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{gpu}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed", Controller: ptr.To(true)}}
		})},
		{name: "shared class in a namespace its InstanceClass lists", ns: "tenant", pod: isoPod(gold, nil)},
		{name: "shared class selecting its own marker", ns: "tenant", pod: isoPod(gold, func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{classmarker.Key: "gold"}
		})},
		{name: "unclassed pod staying off marked nodes", ns: "tenant", pod: isoPod(nil, func(p *corev1.Pod) {
			p.Spec.Affinity = nodeTerms([]corev1.NodeSelectorRequirement{{Key: classmarker.Key, Operator: corev1.NodeSelectorOpDoesNotExist}})
		})},
		// why: without an InstanceClass named red, red in another namespace is that namespace's
		// own class (its owner term names only it).
		{name: "another namespace's class value is a class of its own", ns: "other", pod: isoPod(red, nil)},
		{name: "release namespace: the incident is exempt", ns: "release", pod: isoPod(red, incident)},
		{name: "exempt namespace: the incident is exempt", ns: "exempt", pod: isoPod(red, incident)},
		{name: "exempt namespace: unclassed node daemon tolerating every taint", ns: "exempt", pod: isoPod(nil, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			p.OwnerReferences = []metav1.OwnerReference{isoDSRef}
		})},
	}
}

// isoUpdate is an update of a pod the webhook and the policies admitted (before, created in
// ns; the webhook's patch applied to a classed one): change makes the new pod. refused as in
// isoCase (without toleration indices: the API server adds tolerations at creation); a
// refused update is worded exactly as the webhook words creating the new pod.
// existing marks a before that only a pod created before the policies (or in a namespace
// exempt at the time) can be: it is evaluated offline only.
type isoUpdate struct {
	name, ns string
	before   *corev1.Pod
	change   func(*corev1.Pod)
	refused  string
	existing bool
}

func isoUpdates() []isoUpdate {
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	plain := isoPod(map[string]string{"app": "web"}, func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{gpu} })
	classed := isoPod(map[string]string{"berth.dev/instance-class": "blue"}, nil)
	addTol := func(tol corev1.Toleration) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, tol) }
	}
	relabel := func(p *corev1.Pod) { p.Labels["tier"] = "front" }
	return []isoUpdate{
		// why: tolerations may be added to any existing pod; a pending unclassed pod would then
		// be scheduled onto the pool.
		{name: "unclassed pod adds the pool toleration", ns: "tenant", before: plain, change: addTol(isoPoolTol),
			refused: "]: tolerates the isolation pool taint ipp=true:NoSchedule; only pods of an instance class"},
		{name: "unclassed pod adds a toleration of every taint", ns: "tenant", before: plain, change: addTol(corev1.Toleration{Operator: corev1.TolerationOpExists}),
			refused: "]: tolerates the isolation pool taint"},
		{name: "classed pod adds a DaemonSet owner", ns: "tenant", before: classed, change: func(p *corev1.Pod) { p.OwnerReferences = append(p.OwnerReferences, isoDSRef) },
			refused: "metadata.ownerReferences[0]: pod of instance class blue is owned by DaemonSet attack; only pods in an exempt namespace"},
		// why: a pod held by scheduling gates may gain node affinity requirements.
		{name: "classed pod gains another class's marker", ns: "tenant", before: isoPod(map[string]string{"berth.dev/instance-class": "blue"}, func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "e2e.berth.dev/hold"}}
		}), change: func(p *corev1.Pod) {
			t := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
			t.MatchExpressions = append(t.MatchExpressions, corev1.NodeSelectorRequirement{Key: classmarker.Key, Operator: corev1.NodeSelectorOpIn, Values: []string{"red_blue"}})
		}, refused: "matchExpressions[2]: selects the isolation marker " + classmarker.Key + " In [red_blue]; a pod of instance class blue may select the marker"},
		{name: "unclassed pod adds another toleration", ns: "tenant", before: plain, change: addTol(corev1.Toleration{Key: "ssd", Operator: corev1.TolerationOpExists})},
		{name: "classed pod is relabelled outside its class", ns: "tenant", before: classed, change: relabel},
		{name: "unclassed pod that already reached the pool is relabelled", ns: "tenant", before: isoPod(map[string]string{"app": "old"}, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{isoPoolTol}
		}), change: relabel, existing: true},
		{name: "exempt namespace: unclassed pod adds the pool toleration", ns: "exempt", before: plain, change: addTol(isoPoolTol)},
		{name: "exempt namespace: classed pod adds a DaemonSet owner", ns: "exempt", before: classed, change: func(p *corev1.Pod) { p.OwnerReferences = append(p.OwnerReferences, isoDSRef) }},
	}
}

// isoRelease renders the chart in mode as release rel in namespace rel+"-system", with
// rel+"-exempt" added to isolation.exemptNamespaces; the namespaces of isoCase.ns follow.
func isoRelease(t *testing.T, mode, rel string) (objs []*unstructured.Unstructured, nsOf map[string]string) {
	t.Helper()
	r, err := Render(rel, rel+"-system", map[string]any{
		"scheduler": map[string]any{"plugins": map[string]any{"instanceIsolation": map[string]any{"enabled": true, "isolatedProfileName": "berth-scheduler-isolated"}}},
		"isolation": map[string]any{"enabled": true, "mode": mode, "exemptNamespaces": []any{"kube-system", rel + "-exempt"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return objectsOf(t, r), map[string]string{"tenant": rel + "-tenant", "release": rel + "-system", "exempt": rel + "-exempt", "other": rel + "-other"}
}

// isoClasses are the InstanceClasses every release's policies and webhook judge against:
// class gold is shared by the three releases' tenant namespaces (and no "other" one).
func isoClasses() []*berthv1alpha1.InstanceClass {
	return []*berthv1alpha1.InstanceClass{{
		TypeMeta:   metav1.TypeMeta{APIVersion: berthv1alpha1.GroupVersion.String(), Kind: "InstanceClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "gold"},
		Spec:       berthv1alpha1.InstanceClassSpec{Namespaces: []string{"iso-ipp-tenant", "iso-berth-tenant", "iso-both-tenant"}},
	}}
}

// isoGrants is isoClasses as the webhook's operator cache answers.
func isoGrants() webhook.StaticGrants {
	g := webhook.StaticGrants{}
	for _, ic := range isoClasses() {
		g[ic.Name] = ic.Spec.Namespaces
	}
	return g
}

// patched is pod after the webhook's answer: the pod itself, or with the patch applied.
func patched(t *testing.T, pod *corev1.Pod, res webhook.Result) *corev1.Pod {
	t.Helper()
	if len(res.Patch) == 0 {
		return pod
	}
	return framework.PatchedPod(t, pod, res.Patch)
}

// policyVerdict evaluates the chart's CREATE policies for pods as the API server does:
// matchConstraints' namespace selector, matchConditions, variables in order, validations, the
// first failed validation's message. It returns that message ("" admitted), the policy that
// refused and the dearest expression's cost.
type policyEval struct {
	env      *cel.Env
	policies []*admissionv1.ValidatingAdmissionPolicy
	mwc      string // the webhook's matchCondition
	// params are the Nodes a policy with paramKind Node is evaluated against (its binding's
	// paramRef.selector applied to isoNodes), by policy name; bindingCond is the binding
	// webhook's matchCondition (isolation_nodename_test.go).
	params      map[string][]map[string]any
	bindingCond string
}

func newPolicyEval(t *testing.T, objs []*unstructured.Unstructured) *policyEval {
	t.Helper()
	envSet, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: environment.DefaultCompatibilityVersion(),
		EnvOptions: []cel.EnvOption{cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType),
			cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)), cel.Variable("params", cel.DynType)},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := envSet.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	pe := &policyEval{env: env, params: map[string][]map[string]any{}}
	for _, o := range objs {
		pe.addNodeParams(t, o)
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy":
			var p admissionv1.ValidatingAdmissionPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &p); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(p.Name, "-instance-isolation") {
				pe.policies = append(pe.policies, &p)
			}
		case "MutatingWebhookConfiguration":
			conds, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			mc := conds[0].(map[string]any)["matchConditions"].([]any)
			if len(mc) != 1 {
				t.Fatalf("webhook matchConditions %v: want one", mc)
			}
			pe.mwc = mc[0].(map[string]any)["expression"].(string)
		}
	}
	for _, p := range pe.policies {
		if p.Spec.ParamKind != nil && p.Spec.ParamKind.Kind == "InstanceClass" {
			// why: its binding selects every InstanceClass (paramRef.selector {}).
			pe.params[p.Name] = nil
			for _, ic := range isoClasses() {
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ic)
				if err != nil {
					t.Fatal(err)
				}
				pe.params[p.Name] = append(pe.params[p.Name], obj)
			}
		}
	}
	if len(pe.policies) != 7 || pe.mwc == "" {
		t.Fatalf("%d policies, webhook condition %q: want the classed, class-grant, pool-access, marker, fixed-class, node-name and binding policies and the webhook's condition", len(pe.policies), pe.mwc)
	}
	return pe
}

func (pe *policyEval) eval(t *testing.T, expr string, act map[string]any, maxCost *uint64) any {
	t.Helper()
	ast, iss := pe.env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compiling %q: %v", expr, iss.Err())
	}
	// why: the API server's per-expression limit; exceeding it fails the request.
	prg, err := pe.env.Program(ast, cel.CostLimit(celconfig.PerCallLimit), cel.EvalOptions(cel.OptTrackCost))
	if err != nil {
		t.Fatal(err)
	}
	out, det, err := prg.Eval(act)
	if err != nil {
		t.Fatalf("evaluating %q: %v", expr, err)
	}
	*maxCost = max(*maxCost, *det.ActualCost())
	return out.Value()
}

// verdict decides a CREATE of pod (old nil) or an UPDATE of old to pod in namespace ns.
// sentToWebhook is the webhook's matchCondition (CREATE only: the webhook sees no update).
func (pe *policyEval) verdict(t *testing.T, ns string, old, pod *corev1.Pod) (msg, policy string, sentToWebhook bool, maxCost uint64) {
	t.Helper()
	asObject := func(p *corev1.Pod) map[string]any {
		if p == nil {
			return nil
		}
		if p.Spec.SchedulerName == "" {
			// why: the API server defaults it before validating admission; the policy reads it.
			p = p.DeepCopy()
			p.Spec.SchedulerName = corev1.DefaultSchedulerName
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	op := admissionv1.Create
	if old != nil {
		op = admissionv1.Update
	}
	vars := map[string]any{}
	act := map[string]any{"object": asObject(pod), "oldObject": asObject(old), "variables": vars, "request": map[string]any{"operation": string(op), "namespace": ns}}
	if op == admissionv1.Create {
		sentToWebhook = pe.eval(t, pe.mwc, act, &maxCost).(bool)
	}
	nsLabels := labels.Set{"kubernetes.io/metadata.name": ns}
	for _, p := range pe.policies {
		if r := p.Spec.MatchConstraints.ResourceRules[0]; !slices.Contains(r.Operations, op) || !slices.Contains(r.Resources, "pods") {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.MatchConstraints.NamespaceSelector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(nsLabels) {
			continue
		}
		matched := true
		for _, c := range p.Spec.MatchConditions {
			matched = matched && pe.eval(t, c.Expression, act, &maxCost).(bool)
		}
		if !matched {
			continue
		}
		if msg := pe.validate(t, p, act, &maxCost); msg != "" {
			return msg, p.Name, sentToWebhook, maxCost
		}
	}
	return "", "", sentToWebhook, maxCost
}

// TestIsolationPolicyAgreesWithWebhook: in every mode, for each case, the webhook (configured
// by the chart's operator arguments) and the chart's policies (evaluated with the API server's
// CEL environment and cost limit) decide alike: a pod the webhook refuses for reaching the pool
// is refused by the policy with the same words; a pod it admits is admitted by the policy
// (after its patch); and the webhook's matchCondition sends it exactly the pods it would
// refuse or patch. The real API server runs the same cases in TestIsolationPolicyOnAPIServer.
func TestIsolationPolicyAgreesWithWebhook(t *testing.T) {
	for _, mode := range []string{"ipp", "berth", "both"} {
		rel := "iso-" + mode
		objs, nsOf := isoRelease(t, mode, rel)
		hook := webhookConfigOf(t, objs, rel)
		hook.Nodes = isoNodes()
		hook.Classes = isoGrants()
		if want := []string{rel + "-system", "kube-system", rel + "-exempt"}; !slices.Equal(hook.ExemptNamespaces, want) {
			t.Fatalf("%s: webhook exempts %v, want %v", mode, hook.ExemptNamespaces, want)
		}
		pe := newPolicyEval(t, objs)
		mirror := isoPod(map[string]string{"ipp-class": "red"}, func(p *corev1.Pod) {
			p.Annotations = map[string]string{webhook.MirrorPodAnnotation: "x"}
			p.Spec.NodeName = "n1"
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		})
		cases := append(append(isoCases(), nodeNameCases()...),
			isoCase{name: "kube-system: the incident", ns: "kube-system", pod: isoCases()[0].pod},
			isoCase{name: "mirror pod", ns: "tenant", pod: mirror},
			isoCase{name: "conflicting classes", ns: "tenant", pod: isoPod(map[string]string{"ipp-class": "a", "berth.dev/instance-class": "b"}, nil),
				refused: "conflicting instance classes: ipp-class=a, berth.dev/instance-class=b"})
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				ns := tc.ns
				if n, ok := nsOf[ns]; ok {
					ns = n
				}
				p := tc.pod.DeepCopy()
				p.Namespace = ns
				res, herr := hook.Mutate(p)
				if tc.refused == "" && herr != nil || tc.refused != "" && (herr == nil || !strings.Contains(herr.Error(), tc.refused)) {
					t.Fatalf("webhook: %v, want refused containing %q", herr, tc.refused)
				}
				after := isoAsPolicySees(t, hook, p, res, herr)
				msg, policy, sent, cost := pe.verdict(t, ns, nil, after)
				if cost >= celconfig.PerCallLimit {
					t.Errorf("dearest expression costs %d, over the API server's per-call limit", cost)
				}
				switch {
				case herr == nil && msg != "":
					t.Fatalf("webhook admits, policy %s refuses: %s", policy, msg)
				case herr != nil && msg == "":
					t.Fatalf("webhook refuses (%v), the policy admits", herr)
				case herr != nil && !strings.Contains(msg, tc.refused):
					t.Fatalf("policy %s: %q, want it to contain %q", policy, msg, tc.refused)
				case herr != nil && !strings.Contains(tc.refused, "conflicting") && msg != "instance isolation: "+herr.Error():
					t.Fatalf("the policy and the webhook word the refusal differently:\npolicy  %q\nwebhook %q", msg, "instance isolation: "+herr.Error())
				}
				if acts := herr != nil || len(res.Patch) > 0; acts && !sent {
					t.Fatalf("the webhook would refuse or patch the pod, but its matchCondition does not send it (refusal %v)", herr)
				} else if !acts && res.Exempt == "" && sent && p.Spec.NodeName == "" {
					// why: a pod naming a node is sent for the webhook to read the Node; it
					// leaves alone one that is not the pool's.
					t.Fatalf("the webhook's matchCondition sends a pod it leaves alone")
				}
			})
		}
		for _, tc := range isoUpdates() {
			t.Run(mode+"/update/"+tc.name, func(t *testing.T) {
				ns := nsOf[tc.ns]
				before, after := isoUpdatePods(t, hook, ns, tc)
				msg, policy, _, cost := pe.verdict(t, ns, before, after)
				if cost >= celconfig.PerCallLimit {
					t.Errorf("dearest expression costs %d, over the API server's per-call limit", cost)
				}
				if tc.refused == "" {
					if msg != "" {
						t.Fatalf("policy %s refuses: %s", policy, msg)
					}
					return
				}
				if want := isoCreateRefusal(t, hook, after, tc.refused); msg != want {
					t.Fatalf("policy %s: %q\nwant the webhook's words for creating the new pod: %q", policy, msg, want)
				}
			})
		}
	}
}

// isoUpdatePods is tc's pod before (as admitted, in ns) and after its change.
func isoUpdatePods(t *testing.T, hook webhook.Config, ns string, tc isoUpdate) (before, after *corev1.Pod) {
	t.Helper()
	before = tc.before.DeepCopy()
	before.Namespace, before.Name = ns, "u"
	if !tc.existing {
		res, err := hook.Mutate(before)
		if err != nil {
			t.Fatalf("the webhook refuses the pod before the update: %v", err)
		}
		before = patched(t, before, res)
	}
	after = before.DeepCopy()
	tc.change(after)
	return before, after
}

// isoCreateRefusal is how the webhook refuses creating p, which must contain part, with the
// policies' prefix.
func isoCreateRefusal(t *testing.T, hook webhook.Config, p *corev1.Pod, part string) string {
	t.Helper()
	_, err := hook.Mutate(p)
	if err == nil || !strings.Contains(err.Error(), part) {
		t.Fatalf("the webhook, creating the new pod: %v, want a refusal containing %q", err, part)
	}
	return "instance isolation: " + err.Error()
}

// TestIsolationPolicyOnAPIServer: the chart's policies of every mode, created on a real API
// server, refuse the cases of isoCases with the webhook's words and admit the rest. Each
// mode's bindings are narrowed to its own namespaces so the three releases do not judge each
// other's pods; every exemption still comes from the policy's own namespaceSelector (the
// narrowed binding includes the release and the extra exempt namespace). Pods are created as
// dry runs: nothing is stored.
func TestIsolationPolicyOnAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The controller manager stays: namespaces get their default ServiceAccount from it.
	c := framework.StartCluster(ctx, t, cluster.Config{Logf: t.Logf, WithoutKWOK: true, WithoutDefaultScheduler: true, WithoutBerthCRDs: true})
	adm := c.Client.AdmissionregistrationV1()
	createIsoNodes(ctx, t, c.Client)
	createIsoClasses(ctx, t, c)
	admin := whoAmI(ctx, t, c.Client)
	for _, mode := range []string{"ipp", "berth", "both"} {
		rel := "iso-" + mode
		objs, nsOf := isoRelease(t, mode, rel)
		hook := webhookConfigOf(t, objs, rel)
		hook.Nodes = isoNodes()
		hook.Classes = isoGrants()
		var names []string
		for _, ns := range nsOf {
			if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
				t.Fatal(err)
			}
			names = append(names, ns)
		}
		var policies []string
		for _, o := range objs {
			switch o.GetKind() {
			case "ValidatingAdmissionPolicy":
				var p admissionv1.ValidatingAdmissionPolicy
				toTypedOrFail(t, o, &p)
				if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{}); err != nil {
					t.Fatalf("%s: %v", p.Name, err)
				}
				policies = append(policies, p.Name)
				t.Cleanup(func() {
					_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
				})
			case "ValidatingAdmissionPolicyBinding":
				var b admissionv1.ValidatingAdmissionPolicyBinding
				toTypedOrFail(t, o, &b)
				b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: names}}}}
				if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
					t.Fatalf("%s: %v", b.Name, err)
				}
				t.Cleanup(func() {
					_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
				})
			}
		}
		// The API server type-checks each policy against the Pod schema; a warning means an
		// expression it could not check (and may fail at admission).
		if err := framework.WaitPoliciesTypeChecked(ctx, c.Client, policies...); err != nil {
			t.Fatal(err)
		}
		for i, tc := range append(isoCases(), nodeNameCases()...) {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				p := tc.pod.DeepCopy()
				p.Namespace, p.Name = nsOf[tc.ns], fmt.Sprintf("case-%d", i)
				res, herr := hook.Mutate(p)
				if tc.refused == "" && herr != nil || tc.refused != "" && herr == nil {
					t.Fatalf("webhook: %v, want refused %v", herr, tc.refused != "")
				}
				p = isoAsPolicySees(t, hook, p, res, herr)
				var err error
				// why: a new binding takes effect a moment after it is created; until then a pod
				// the policy must refuse is admitted.
				_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
					_, err = c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
					return (err != nil) == (tc.refused != ""), nil
				})
				if tc.refused == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+rel+"-instance-isolation") {
					t.Fatalf("want the policy's refusal, got %v", err)
				}
				if want := "instance isolation: " + herr.Error(); !strings.HasSuffix(err.Error(), want) {
					t.Fatalf("the API server's refusal does not end with the webhook's words:\n got %s\nwant …%s", err, want)
				}
				t.Logf("refused: %v", err)
			})
		}
		t.Run(mode, func(t *testing.T) { apiServerBindings(ctx, t, c.Client, hook, nsOf, admin) })
		// Updates of pods created here (and deleted at the end), answered as dry runs.
		for i, tc := range isoUpdates() {
			if tc.existing {
				continue
			}
			t.Run(mode+"/update/"+tc.name, func(t *testing.T) {
				before, _ := isoUpdatePods(t, hook, nsOf[tc.ns], tc)
				before.Name = fmt.Sprintf("update-%d", i)
				pods := c.Client.CoreV1().Pods(before.Namespace)
				got, err := pods.Create(ctx, before, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("creating the pod to update: %v", err)
				}
				t.Cleanup(func() {
					_ = pods.Delete(context.Background(), got.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
				})
				upd := got.DeepCopy()
				tc.change(upd)
				// why: the policy judging updates may be another object than the ones the create
				// cases above waited for, and its binding takes effect a moment after it is made
				// (CI once saw the first update admitted); a dry run can be repeated.
				_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
					_, err = pods.Update(ctx, upd, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
					return (err != nil) == (tc.refused != ""), nil
				})
				if tc.refused == "" {
					if err != nil {
						t.Fatalf("update refused: %v", err)
					}
					return
				}
				// why: the API server added tolerations of its own at creation
				// (DefaultTolerationSeconds), so the index is the stored pod's.
				want := isoCreateRefusal(t, hook, upd, tc.refused)
				if err == nil || !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), want) {
					t.Fatalf("update: %v\nwant the policy's refusal ending with %q", err, want)
				}
				t.Logf("refused: %v", err)
			})
		}
	}
}

// isoAsPolicySees is the pod the policies judge after the webhook answered res, herr: the
// patched pod when admitted; the pod itself when refused, except for a class its namespace is
// not granted, which is judged as the webhook would have constrained it with the class as the
// namespace's own, and for a classed pod selecting another class's marker, judged as the webhook
// would have constrained it without the marker. why: mutating admission runs first, so the policies decide only where the
// webhook was skipped; an unconstrained pod is then refused for lacking the constraint (the
// classed policy's words), and the grant refusal is what a pod written with every constraint
// meets (the webhook's words, from the class-grant policy).
func isoAsPolicySees(t *testing.T, hook webhook.Config, p *corev1.Pod, res webhook.Result, herr error) *corev1.Pod {
	t.Helper()
	if herr == nil {
		return patched(t, p, res)
	}
	own := hook
	switch {
	case strings.Contains(herr.Error(), "grants it to"):
		own.Classes = nil
	case strings.Contains(herr.Error(), "selects the isolation marker") && !strings.Contains(herr.Error(), "only pods of an instance class"):
		// why: likewise a classed pod selecting another class's marker meets the marker policy
		// only when written with every other constraint.
		own.AutoscalerMarker = false
	default:
		return p
	}
	res, err := own.Mutate(p)
	if err != nil {
		t.Fatalf("the webhook refuses the pod as its namespace's class too: %v", err)
	}
	return patched(t, p, res)
}

// createIsoClasses installs the InstanceClass CRD (the class-grant policy's paramKind) and
// isoClasses, removed at the end.
func createIsoClasses(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if err := framework.InstallInstanceClassCRD(ctx, c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	api := dyn.Resource(framework.InstanceClassGVR)
	for _, ic := range isoClasses() {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ic)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("InstanceClass %s: %v", ic.Name, err)
		}
		t.Cleanup(func() { _ = api.Delete(context.Background(), ic.Name, metav1.DeleteOptions{}) })
	}
}

func toTypedOrFail(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}
