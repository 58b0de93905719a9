package chart

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
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
	for _, want := range []string{"--isolation-webhook ", "--isolation-mode=berth", "--isolation-pool-label=ipp=true", "--isolation-pool-taint=ipp=true:NoSchedule",
		"--isolation-webhook-configuration=berth-instance-isolation", "--isolation-webhook-secret=berth-system/berth-isolation-webhook-tls",
		"--isolation-webhook-cert-hosts=berth-isolation-webhook.berth-system.svc"} {
		if !strings.Contains(joined+" ", want) {
			t.Errorf("operator args lack %q: %s", want, joined)
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
		{`isolation: {enabled: true}`, "isolation.mode berth: InstanceIsolation enforces it"},
		{`isolation: {enabled: true, mode: both}`, "isolation.mode both: InstanceIsolation enforces it"},
		{`operator: {enabled: false}
isolation: {enabled: true, mode: ipp}`, "set operator.enabled"},
		{isoBerth + `
isolation: {enabled: true, classLabels: [team]}
scheduler: {plugins: {instanceIsolation: {enabled: true, classLabels: [tenant]}}}`, "must read the same labels"},
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
