package chart

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// operatorRules are the rules of every ClusterRole bound to the operator's ServiceAccount.
func operatorRules(t *testing.T, objs []*unstructured.Unstructured) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, b := range objs {
		if b.GetKind() != "ClusterRoleBinding" {
			continue
		}
		subs, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		bound := false
		for _, s := range subs {
			if m := s.(map[string]any); m["kind"] == "ServiceAccount" && m["name"] == "berth-operator" {
				bound = true
			}
		}
		if !bound {
			continue
		}
		role, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		if r := find(objs, "ClusterRole", role); r != nil {
			rules, _, _ := unstructured.NestedSlice(r.Object, "rules")
			for _, x := range rules {
				out[role] = append(out[role], x.(map[string]any))
			}
		}
	}
	return out
}

// grants says whether a rule of rules grants verb on resource (core group).
func grants(rules map[string][]map[string]any, resource, verb string) []string {
	var roles []string
	for role, rs := range rules {
		for _, r := range rs {
			if slices.Contains(toStrings(r["apiGroups"]), "") && slices.Contains(toStrings(r["resources"]), resource) && slices.Contains(toStrings(r["verbs"]), verb) {
				roles = append(roles, role)
			}
		}
	}
	return roles
}

// isoMarker is isoBerth with isolation.autoscalerMarker set to the flow mapping m.
func isoMarker(m string) string {
	return "scheduler: {plugins: {instanceIsolation: {enabled: true}}}\nisolation: {enabled: true, autoscalerMarker: " + m + "}"
}

// TestIsolationAutoscalerMarkerValues: the marker is on by default with isolation; only then
// does the operator hold patch on nodes (in a role of its own, with pods read and events), get
// the flags, and does the marker policy exist. Off: none of it.
func TestIsolationAutoscalerMarkerValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		on     bool
		grace  string
	}{
		{name: "default", values: isoBerth, on: true, grace: "2m"},
		{name: "grace set", values: isoMarker("{emptyGrace: 45s}"), on: true, grace: "45s"},
		{name: "off", values: isoMarker("{enabled: false}")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := renderValues(t, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			objs := objectsOf(t, r)
			args, _ := containerField(find(objs, "Deployment", "berth-operator"), "args")
			as := toStrings(args)
			if want := "--isolation-autoscaler-marker=" + map[bool]string{true: "true", false: "false"}[tc.on]; !slices.Contains(as, want) {
				t.Errorf("operator args %v lack %s", as, want)
			}
			hasGrace := slices.Contains(as, "--isolation-marker-empty-grace="+tc.grace)
			if tc.on != hasGrace {
				t.Errorf("operator args %v: grace %q present %v, want %v", as, tc.grace, hasGrace, tc.on)
			}
			rules := operatorRules(t, objs)
			patchers := grants(rules, "nodes", "patch")
			if tc.on && !slices.Equal(patchers, []string{"berth-operator-isolation-marker"}) || !tc.on && len(patchers) > 0 {
				t.Errorf("roles granting the operator patch on nodes: %v (marker on %v)", patchers, tc.on)
			}
			if tc.on {
				want := []string{`[] [nodes] [patch]`, `[] [pods] [get list watch]`, `[events.k8s.io] [events] [create patch]`}
				var got []string
				for _, r := range rules["berth-operator-isolation-marker"] {
					got = append(got, "["+strings.Join(toStrings(r["apiGroups"]), " ")+"] ["+strings.Join(toStrings(r["resources"]), " ")+"] ["+strings.Join(toStrings(r["verbs"]), " ")+"]")
				}
				if !slices.Equal(got, want) {
					t.Errorf("marker role rules %v, want %v", got, want)
				}
			}
			if p := find(objs, "ValidatingAdmissionPolicy", "berth-instance-isolation-marker"); (p != nil) != tc.on {
				t.Errorf("marker policy rendered %v, want %v", p != nil, tc.on)
			}
			if b := find(objs, "ValidatingAdmissionPolicyBinding", "berth-instance-isolation-marker"); (b != nil) != tc.on {
				t.Errorf("marker policy binding rendered %v, want %v", b != nil, tc.on)
			}
			// The uninstall hook takes the markers off the nodes (list, patch) only when on.
			hook := find(objs, "ClusterRole", "berth-operator-cleanup")
			if hook == nil {
				t.Fatal("no ClusterRole berth-operator-cleanup (the uninstall hook)")
			}
			hookRules, _, _ := unstructured.NestedSlice(hook.Object, "rules")
			nodeRule := false
			for _, x := range hookRules {
				r := x.(map[string]any)
				if slices.Contains(toStrings(r["resources"]), "nodes") {
					nodeRule = slices.Equal(toStrings(r["apiGroups"]), []string{""}) && slices.Equal(toStrings(r["verbs"]), []string{"list", "patch"})
				}
			}
			if nodeRule != tc.on {
				t.Errorf("uninstall hook's node rule (list, patch) present %v, want %v: %v", nodeRule, tc.on, hookRules)
			}
			job := ""
			for _, h := range r.Hooks {
				if h.Kind == "Job" && strings.HasSuffix(h.Path, "/cleanup-hook.yaml") {
					job = h.Manifest
				}
			}
			if job == "" {
				t.Fatal("no uninstall hook Job")
			}
			if strings.Contains(job, "- --cleanup-isolation-markers\n") != tc.on {
				t.Errorf("uninstall hook Job: --cleanup-isolation-markers want %v:\n%s", tc.on, job)
			}
			// The operator's own flag parsing agrees (the webhook writes the terms iff on).
			if c := webhookConfigOf(t, objs, "berth"); c.AutoscalerMarker != tc.on {
				t.Errorf("webhook AutoscalerMarker %v, want %v", c.AutoscalerMarker, tc.on)
			}
		})
	}
	for _, bad := range []struct{ values, msg string }{
		{isoMarker("{emptyGrace: two minutes}"), "/isolation/autoscalerMarker/emptyGrace"},
		{isoMarker("{enabled: sometimes}"), "/isolation/autoscalerMarker/enabled"},
		{isoMarker("{grace: 1m}"), "/isolation/autoscalerMarker"},
	} {
		if _, err := renderValues(t, bad.values); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s: %v, want an error naming %q", bad.values, err, bad.msg)
		}
	}
}
