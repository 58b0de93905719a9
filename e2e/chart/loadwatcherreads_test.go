package chart

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestLoadWatcherReads: the chart's side of authenticated watcher reads. By default the watcher
// checks readers (TokenReview and SubjectAccessReview rights, no --anonymous-reads), every Berth
// reader holds get on nodeloads (the operator for the rebalancer and to grant it to its
// schedulers; kubectl berth's account node load only, no pod lists), the operator pod carries a
// token for the watcher's audience, and no NetworkPolicy is rendered; the switches change exactly
// that, and the schema refuses what they are not.
func TestLoadWatcherReads(t *testing.T) {
	tests := []struct {
		name, values string
		wantArgs     []string // on the watcher container
		noArgs       []string
		wantRules    []string // "Kind/name: group resource verb" present
		noRules      []string
		wantPolicy   bool
		policyPeers  int
		wantErr      string
	}{
		{name: "default: reads authenticated", values: `{}`,
			wantArgs: []string{"--token-audience=berth-loadwatcher", "--token-cache-ttl=1m"},
			noArgs:   []string{"--anonymous-reads"},
			wantRules: []string{
				"ClusterRole/berth-loadwatcher: authorization.k8s.io subjectaccessreviews create",
				"ClusterRole/berth-loadwatcher: authentication.k8s.io tokenreviews create",
				"ClusterRole/berth-load-reader: berth.dev nodeloads/pods get",
				"ClusterRole/berth-operator: berth.dev nodeloads/pods get",
				"ClusterRole/berth-berthctl-load: berth.dev nodeloads get",
				"Role/berth-berthctl-reader: core serviceaccounts/token create berth-berthctl",
			},
			noRules: []string{"ClusterRole/berth-berthctl-load: berth.dev nodeloads/pods get"}},
		{name: "anonymous reads for upstream clients", values: `{loadWatcher: {anonymousReads: true}}`,
			wantArgs:  []string{"--anonymous-reads", "--token-audience=berth-loadwatcher"},
			noRules:   []string{"ClusterRole/berth-loadwatcher: authorization.k8s.io subjectaccessreviews create"},
			wantRules: []string{"ClusterRole/berth-loadwatcher: authentication.k8s.io tokenreviews create"}},
		{name: "anonymous reads, prometheus source: no token is ever checked", values: `{loadWatcher: {anonymousReads: true, source: prometheus, prometheus: {url: "http://prom:9090"}}}`,
			wantArgs: []string{"--anonymous-reads"}, noArgs: []string{"--token-audience=berth-loadwatcher"},
			noRules: []string{"ClusterRole/berth-loadwatcher: authentication.k8s.io tokenreviews create",
				"ClusterRole/berth-loadwatcher: authorization.k8s.io subjectaccessreviews create"}},
		{name: "prometheus source still checks readers", values: `{loadWatcher: {source: prometheus, prometheus: {url: "http://prom:9090"}}}`,
			wantArgs:  []string{"--token-audience=berth-loadwatcher"},
			wantRules: []string{"ClusterRole/berth-loadwatcher: authentication.k8s.io tokenreviews create"}},
		{name: "own audience keeps the schedulers' one", values: `{loadWatcher: {tokenAudience: my-watcher}}`,
			wantArgs: []string{"--token-audience=my-watcher,berth-loadwatcher"}},
		{name: "network policy", values: `{loadWatcher: {networkPolicy: {enabled: true}}}`, wantPolicy: true, policyPeers: 3},
		{name: "network policy with extra peers", values: `{loadWatcher: {networkPolicy: {enabled: true, extraFrom: [{ipBlock: {cidr: 10.0.0.1/32}}]}}}`, wantPolicy: true, policyPeers: 4},
		{name: "schema: anonymousReads is a boolean", values: `{loadWatcher: {anonymousReads: "yes"}}`, wantErr: "anonymousReads"},
		{name: "schema: unknown networkPolicy field", values: `{loadWatcher: {networkPolicy: {enabled: true, from: []}}}`, wantErr: "networkPolicy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &v); err != nil {
				t.Fatal(err)
			}
			r, err := Render("berth", "berth-system", v)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs, err := Objects(r.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			rules := map[string]bool{}
			var args []string
			policies := 0
			peers := 0
			var operator *unstructured.Unstructured
			for _, o := range objs {
				switch o.GetKind() {
				case "ClusterRole", "Role":
					rs, _, _ := unstructured.NestedSlice(o.Object, "rules")
					for _, x := range rs {
						m := x.(map[string]any)
						for _, g := range lwStrs(m["apiGroups"]) {
							if g == "" {
								g = "core"
							}
							for _, res := range lwStrs(m["resources"]) {
								for _, verb := range lwStrs(m["verbs"]) {
									k := o.GetKind() + "/" + o.GetName() + ": " + g + " " + res + " " + verb
									rules[k] = true
									for _, n := range lwStrs(m["resourceNames"]) {
										rules[k+" "+n] = true
									}
								}
							}
						}
					}
				case "Deployment":
					cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
					if o.GetName() == "berth-loadwatcher" {
						args = lwStrs(cs[0].(map[string]any)["args"])
					}
					if o.GetName() == "berth-operator" {
						operator = o
					}
				case "NetworkPolicy":
					policies++
					in, _, _ := unstructured.NestedSlice(o.Object, "spec", "ingress")
					for _, i := range in {
						from, _ := i.(map[string]any)["from"].([]any)
						peers += len(from)
					}
				case "Service":
					if o.GetName() == "berth-loadwatcher" && o.GetAnnotations()["berth.dev/reader-service-account"] != "berth-berthctl" {
						t.Errorf("watcher Service does not name kubectl berth's reader account: %v", o.GetAnnotations())
					}
				}
			}
			for _, a := range tc.wantArgs {
				if !lwHas(args, a) {
					t.Errorf("watcher args %q lack %s", args, a)
				}
			}
			for _, a := range tc.noArgs {
				if lwHas(args, a) {
					t.Errorf("watcher args %q have %s", args, a)
				}
			}
			for _, k := range tc.wantRules {
				if !rules[k] {
					t.Errorf("missing rule %s", k)
				}
			}
			for _, k := range tc.noRules {
				if rules[k] {
					t.Errorf("unexpected rule %s", k)
				}
			}
			if (policies == 1) != tc.wantPolicy || policies > 1 || (tc.wantPolicy && peers != tc.policyPeers) {
				t.Errorf("%d NetworkPolicies with %d peers, want policy %v with %d", policies, peers, tc.wantPolicy, tc.policyPeers)
			}
			if operator != nil {
				vols, _, _ := unstructured.NestedSlice(operator.Object, "spec", "template", "spec", "volumes")
				b, _ := yaml.Marshal(vols)
				if !strings.Contains(string(b), "audience: berth-loadwatcher") && !strings.Contains(string(b), "audience: my-watcher") {
					t.Errorf("operator pod has no projected token for the watcher: %s", b)
				}
			}
		})
	}
}

func lwStrs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func lwHas(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
