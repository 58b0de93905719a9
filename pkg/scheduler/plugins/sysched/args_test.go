package sysched

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestParseArgs(t *testing.T) {
	cases := []struct {
		name      string
		obj       runtime.Object
		wantNS    string
		wantName  string
		wantErrIn []string // every substring must appear in the error
		wantDS    string   // empty: the default, Exclude
	}{
		{name: "nil gives defaults", obj: nil, wantNS: "default", wantName: "all-syscalls"},
		{name: "empty raw gives defaults", obj: &runtime.Unknown{}, wantNS: "default", wantName: "all-syscalls"},
		{name: "upstream fields", obj: &runtime.Unknown{Raw: []byte(`{"defaultProfileNamespace":"sec","defaultProfileName":"full-seccomp"}`)},
			wantNS: "sec", wantName: "full-seccomp"},
		{name: "old README aliases", obj: &runtime.Unknown{Raw: []byte(`{"syschedCRDNamespace":"default","syschedFullCRDName":"full-seccomp"}`)},
			wantNS: "default", wantName: "full-seccomp"},
		{name: "alias equal to canonical is fine", obj: &runtime.Unknown{Raw: []byte(`{"defaultProfileName":"f","syschedFullCRDName":"f"}`)},
			wantNS: "default", wantName: "f"},
		{name: "yaml", obj: &runtime.Unknown{ContentType: runtime.ContentTypeYAML, Raw: []byte("defaultProfileName: full\n")},
			wantNS: "default", wantName: "full"},
		{name: "typed args", obj: &Args{SyschedFullCRDName: "typed"}, wantNS: "default", wantName: "typed"},
		{name: "conflicting alias", obj: &runtime.Unknown{Raw: []byte(`{"defaultProfileName":"a","syschedFullCRDName":"b"}`)},
			wantErrIn: []string{"syschedFullCRDName", "defaultProfileName"}},
		{name: "unknown field", obj: &runtime.Unknown{Raw: []byte(`{"defaultProfileNam":"a"}`)},
			wantErrIn: []string{"defaultProfileNam"}},
		{name: "case-only typo is unknown", obj: &runtime.Unknown{Raw: []byte(`{"DefaultProfileName":"a"}`)},
			wantErrIn: []string{"DefaultProfileName"}},
		{name: "unknown yaml field", obj: &runtime.Unknown{ContentType: runtime.ContentTypeYAML, Raw: []byte("fullProfile: x\n")},
			wantErrIn: []string{"fullProfile"}},
		{name: "wrong type", obj: &runtime.Unknown{Raw: []byte(`{"defaultProfileName":5}`)},
			wantErrIn: []string{"defaultProfileName"}},
		{name: "invalid namespace", obj: &runtime.Unknown{Raw: []byte(`{"defaultProfileNamespace":"Not_Valid"}`)},
			wantErrIn: []string{"defaultProfileNamespace"}},
		{name: "path as name", obj: &runtime.Unknown{Raw: []byte(`{"defaultProfileName":"operator/full.json"}`)},
			wantErrIn: []string{"defaultProfileName"}},
		{name: "unsupported content type", obj: &runtime.Unknown{ContentType: "application/xml", Raw: []byte(`<a/>`)},
			wantErrIn: []string{"content type"}},
		{name: "foreign object", obj: &runtime.Unknown{Raw: []byte(`[]`)}, wantErrIn: []string{"decoding"}},
		{name: "daemonSetPods Count and a selector", obj: &runtime.Unknown{Raw: []byte(`{"daemonSetPods":"Count","excludedPodSelector":{"matchLabels":{"every":"node"}}}`)},
			wantNS: "default", wantName: "all-syscalls", wantDS: DaemonSetPodsCount},
		{name: "daemonSetPods unknown", obj: &runtime.Unknown{Raw: []byte(`{"daemonSetPods":"Baseline"}`)},
			wantErrIn: []string{"daemonSetPods", "Baseline", "Exclude", "Count"}},
		{name: "excludedPodSelector invalid", obj: &runtime.Unknown{Raw: []byte(`{"excludedPodSelector":{"matchExpressions":[{"key":"a","operator":"Near"}]}}`)},
			wantErrIn: []string{"excludedPodSelector.matchExpressions[0].operator", "Near"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseArgs(tc.obj)
			if len(tc.wantErrIn) > 0 {
				if err == nil {
					t.Fatalf("want error, got %+v", got)
				}
				for _, s := range tc.wantErrIn {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.DefaultProfileNamespace != tc.wantNS || got.DefaultProfileName != tc.wantName {
				t.Fatalf("got %s/%s, want %s/%s", got.DefaultProfileNamespace, got.DefaultProfileName, tc.wantNS, tc.wantName)
			}
			if want := tc.wantDS; got.DaemonSetPods != want && !(want == "" && got.DaemonSetPods == DaemonSetPodsExclude) {
				t.Fatalf("daemonSetPods %q, want %q (empty: Exclude)", got.DaemonSetPods, want)
			}
		})
	}
}

// TestExampleSchedulerConfig keeps examples/sysched/scheduler-config.yaml valid for ParseArgs.
func TestExampleSchedulerConfig(t *testing.T) {
	docs := loadExample(t, "scheduler-config.yaml")
	var cfg struct {
		Profiles []struct {
			PluginConfig []struct {
				Name string                 `json:"name"`
				Args map[string]interface{} `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	raw, _ := json.Marshal(docs[0])
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range cfg.Profiles {
		for _, pc := range p.PluginConfig {
			if pc.Name != Name {
				continue
			}
			a, _ := json.Marshal(pc.Args)
			if _, err := ParseArgs(&runtime.Unknown{Raw: a}); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no SySched pluginConfig in the example")
	}
}
