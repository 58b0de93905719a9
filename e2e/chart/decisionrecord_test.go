package chart

import (
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/pkg/scheduler/decisionrecord"
)

func mustRender(t *testing.T, values string) *Rendered {
	t.Helper()
	r, err := renderValues(t, values)
	if err != nil {
		t.Fatalf("%s: %v", values, err)
	}
	return r
}

// TestDecisionRecordValues: scheduler.plugins.decisionRecord reaches the SecondaryScheduler and,
// through the operator's own render path, DecisionRecord's args in the scheduler's
// configuration; off, the scheduler records nothing and the chart grants nothing to read.
func TestDecisionRecordValues(t *testing.T) {
	cases := []struct {
		name, values string
		on           bool
		records      int32
		topNodes     int32
		summary      decisionrecord.Summary
	}{
		{name: "defaults", values: `{}`, on: true, records: 1000, topNodes: 10, summary: decisionrecord.SummaryNone},
		{name: "args", values: `scheduler: {plugins: {decisionRecord: {enabled: true, records: 50, topNodes: 3, summary: Event}}}`,
			on: true, records: 50, topNodes: 3, summary: decisionrecord.SummaryEvent},
		{name: "off", values: `scheduler: {plugins: {decisionRecord: {enabled: false}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, tc.values)
			ss := secondaryScheduler(t, r)
			dr := ss.Spec.Plugins.DecisionRecord
			// why: left out, the operator records anyway; off must be said explicitly.
			if dr == nil || dr.Enabled == nil || *dr.Enabled != tc.on {
				t.Fatalf("decisionRecord rendered as %+v, want enabled %v written out", dr, tc.on)
			}
			cfg, yml := operatorConfig(t, ss)
			var args *decisionrecord.Args
			var err error
			for _, pc := range cfg.Profiles[0].PluginConfig {
				if pc.Name == decisionrecord.Name {
					if args, err = decisionrecord.ParseArgs(pc.Args); err != nil {
						t.Fatal(err)
					}
				}
			}
			if (args != nil) != tc.on {
				t.Fatalf("DecisionRecord args present %v, want %v:\n%s", args != nil, tc.on, yml)
			}
			if tc.on && (*args.Records != tc.records || *args.TopNodes != tc.topNodes || *args.Summary != tc.summary) {
				t.Errorf("args %d/%d/%s, want %d/%d/%s", *args.Records, *args.TopNodes, *args.Summary, tc.records, tc.topNodes, tc.summary)
			}
			roles := find(objectsOf(t, r), "ClusterRole", "berth-explain-reader") != nil
			if roles != tc.on {
				t.Errorf("explain-reader ClusterRole rendered %v, want %v", roles, tc.on)
			}
		})
	}
}

// TestExplainReaderRoles pins what the chart grants explain readers: get on the endpoint
// (ClusterRole), and in the release namespace the scheduler's Lease by name, pods get and
// pods/portforward create (Role), with the policy narrowing port-forwards to the scheduler's
// pods; both follow scheduler.name and scheduler.schedulerName.
func TestExplainReaderRoles(t *testing.T) {
	r := mustRender(t, `scheduler: {name: sched, schedulerName: my-sched, plugins: {decisionRecord: {enabled: true, aggregateTo: [view]}}}`)
	objs := objectsOf(t, r)
	cr := find(objs, "ClusterRole", "berth-explain-reader")
	role := find(objs, "Role", "berth-explain-reader")
	vap := find(objs, "ValidatingAdmissionPolicy", "berth-explain-reader-portforward")
	vapb := find(objs, "ValidatingAdmissionPolicyBinding", "berth-explain-reader-portforward")
	if cr == nil || role == nil || vap == nil || vapb == nil {
		t.Fatalf("ClusterRole %v, Role %v, policy %v, binding %v", cr != nil, role != nil, vap != nil, vapb != nil)
	}
	var c rbacv1.ClusterRole
	var ro rbacv1.Role
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cr.Object, &c); err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(role.Object, &ro); err != nil {
		t.Fatal(err)
	}
	wantCR := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug/berth/explain"}, Verbs: []string{"get"}}}
	if !reflect.DeepEqual(c.Rules, wantCR) {
		t.Errorf("ClusterRole rules %+v, want %+v", c.Rules, wantCR)
	}
	if c.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" || c.Labels["berth.dev/aggregate-to-explain-reader"] != "true" {
		t.Errorf("ClusterRole labels %v", c.Labels)
	}
	if _, edit := c.Labels["rbac.authorization.k8s.io/aggregate-to-edit"]; edit {
		t.Errorf("aggregated into edit without being asked")
	}
	wantRole := []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"my-sched"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"create"}},
	}
	if ro.Namespace != "berth-system" || !reflect.DeepEqual(ro.Rules, wantRole) {
		t.Errorf("Role %s rules %+v, want in berth-system %+v", ro.Namespace, ro.Rules, wantRole)
	}
	conds, _, _ := unstructured.NestedSlice(vap.Object, "spec", "matchConditions")
	if len(conds) != 1 || conds[0].(map[string]any)["expression"] != `!request.name.startsWith('sched-')` {
		t.Errorf("policy does not exempt exactly the scheduler Deployment's pods (sched-*): %v", conds)
	}
	b, _ := yaml.Marshal(vapb.Object)
	if !strings.Contains(string(b), "kubernetes.io/metadata.name: berth-system") {
		t.Errorf("policy binding not limited to the release namespace:\n%s", b)
	}

	for _, bad := range []struct{ values, field string }{
		{`scheduler: {plugins: {decisionRecord: {enabled: true, records: 0}}}`, "/scheduler/plugins/decisionRecord/records"},
		{`scheduler: {plugins: {decisionRecord: {enabled: true, records: 1000001}}}`, "/scheduler/plugins/decisionRecord/records"},
		{`scheduler: {plugins: {decisionRecord: {enabled: true, topNodes: 1001}}}`, "/scheduler/plugins/decisionRecord/topNodes"},
		{`scheduler: {plugins: {decisionRecord: {enabled: true, summary: Annotation}}}`, "/scheduler/plugins/decisionRecord/summary"},
		{`scheduler: {plugins: {decisionRecord: {enabled: true, aggregateTo: [cluster-admin]}}}`, "/scheduler/plugins/decisionRecord/aggregateTo/0"},
		{`scheduler: {plugins: {decisionRecord: {enabled: true, recods: 5}}}`, "/scheduler/plugins/decisionRecord"},
	} {
		_, err := renderValues(t, bad.values)
		if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("%s: err = %v, want a schema error naming %s", bad.values, err, bad.field)
		}
	}
}
