package chart

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/e2e/chart/pluginschema"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// TestValuesSchemaFollowsCRD: values.schema.json's scheduler.plugins and templates/_plugins.tpl
// are what the generator makes of the plugin table and the generated CRD; an arg added to
// api/config/v1 without `make generate`, or a hand edit of either file, fails here.
func TestValuesSchemaFollowsCRD(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chartDir := filepath.Join(root, "charts", "berth")
	schema, err := os.ReadFile(filepath.Join(chartDir, pluginschema.SchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile(filepath.Join(root, "api", "crds", "berth.dev_secondaryschedulers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wantSchema, wantTpl, err := pluginschema.Generate(schema, crd)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := os.ReadFile(filepath.Join(chartDir, pluginschema.TemplateFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(schema, wantSchema) {
		t.Errorf("%s: scheduler.plugins differs from the CRD's args: run make generate", pluginschema.SchemaFile)
	}
	if !bytes.Equal(tpl, wantTpl) {
		t.Errorf("%s differs from the plugin table: run make generate", pluginschema.TemplateFile)
	}
}

// TestPluginArgsPassThrough: a plugin's args block reaches its SecondaryScheduler args as
// written, with no template line per arg: an arg the chart never mentions arrives too.
func TestPluginArgsPassThrough(t *testing.T) {
	r := mustRender(t, `scheduler:
  plugins:
    sySched: {enabled: true, weight: 1, args: {daemonSetPods: Count, unsetProfile: RuntimeDefault}}
    targetLoadPacking: {args: {targetUtilization: 70, neutralScore: 20}}
  loadAware: {neutralScore: 40, refreshIntervalSeconds: 15}`)
	ss := secondaryScheduler(t, r)
	sy := ss.Spec.Plugins.SySched
	if sy == nil || sy.Args.DaemonSetPods != "Count" || sy.Args.UnsetProfile != "RuntimeDefault" {
		t.Fatalf("sySched rendered as %+v", sy)
	}
	a := ss.Spec.Plugins.TargetLoadPacking.Args
	// The plugin's own args win over scheduler.loadAware's; the rest of those fill in.
	if *a.TargetUtilization != 70 || *a.NeutralScore != 20 || *a.RefreshIntervalSeconds != 15 || a.WatcherAddress == "" {
		t.Fatalf("targetLoadPacking args %+v", a)
	}
	if _, yml := operatorConfig(t, ss); !strings.Contains(string(yml), "daemonSetPods: Count") {
		t.Errorf("the operator's configuration lost an arg:\n%s", yml)
	}
}

// TestSharedArgFromTheTypes: an arg every load-aware plugin shares, which the chart's
// scheduler.loadAware never mentions by hand (workloadProfiles), is accepted there by the
// generated schema and reaches each enabled load-aware plugin's args.
func TestSharedArgFromTheTypes(t *testing.T) {
	r := mustRender(t, `scheduler:
  loadAware: {mode: balance, workloadProfiles: {enabled: false, minSiblings: 5}}`)
	ss := secondaryScheduler(t, r)
	for name, wp := range map[string]any{
		"targetLoadPacking":          ss.Spec.Plugins.TargetLoadPacking.Args.WorkloadProfiles,
		"loadVariationRiskBalancing": ss.Spec.Plugins.LoadVariationRiskBalancing.Args.WorkloadProfiles,
	} {
		b, _ := yaml.Marshal(wp)
		if got := string(b); !strings.Contains(got, "enabled: false") || !strings.Contains(got, "minSiblings: 5") {
			t.Errorf("%s args' workloadProfiles = %s", name, got)
		}
	}
	if _, yml := operatorConfig(t, ss); !strings.Contains(string(yml), "minSiblings: 5") {
		t.Errorf("the operator's configuration lost workloadProfiles:\n%s", yml)
	}
}

// TestPluginArgsBadValues: an unknown arg, a wrong type or a value out of bounds fails at the
// schema, naming the key, before anything is created; an arg at its old place (beside
// enabled) fails naming where it moved.
func TestPluginArgsBadValues(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"unknown arg", `scheduler: {plugins: {targetLoadPacking: {args: {targetUtilisation: 50}}}}`, "/scheduler/plugins/targetLoadPacking/args"},
		{"unknown arg names it", `scheduler: {plugins: {nodeImageLocality: {args: {useNodeStatuses: true}}}}`, "useNodeStatuses"},
		{"wrong type", `scheduler: {plugins: {nodeImageLocality: {args: {useNodeStatus: "yes"}}}}`, "/scheduler/plugins/nodeImageLocality/args/useNodeStatus"},
		{"out of bounds", `scheduler: {plugins: {targetLoadPacking: {args: {neutralScore: 101}}}}`, "/scheduler/plugins/targetLoadPacking/args/neutralScore"},
		{"enum", `scheduler: {plugins: {sySched: {enabled: true, args: {daemonSetPods: Some}}}}`, "/scheduler/plugins/sySched/args/daemonSetPods"},
		{"shared arg out of bounds", `scheduler: {loadAware: {workloadProfiles: {percentile: 0}}}`, "/scheduler/loadAware/workloadProfiles/percentile"},
		{"shared arg unknown field", `scheduler: {loadAware: {workloadProfiles: {minSibling: 3}}}`, "minSibling"},
		{"decision record bounds", `scheduler: {plugins: {decisionRecord: {records: 0}}}`, "/scheduler/plugins/decisionRecord/records"},
		{"old place of an arg", `scheduler: {plugins: {targetLoadPacking: {targetUtilization: 50}}}`,
			"scheduler.plugins.targetLoadPacking.targetUtilization: moved to scheduler.plugins.targetLoadPacking.args.targetUtilization"},
		{"old place of another plugin's arg", `scheduler: {plugins: {sySched: {enabled: true, weight: 1, defaultProfileName: x}}}`,
			"moved to scheduler.plugins.sySched.args.defaultProfileName"},
		{"old place, isolation", `scheduler: {plugins: {instanceIsolation: {enabled: true, classLabels: [team]}}}`,
			"moved to scheduler.plugins.instanceIsolation.args.classLabels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.values), &v); err != nil {
				t.Fatal(err)
			}
			_, err := Render("berth", "berth-system", v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestEveryPluginTurnsOnAndOff: each row of the plugin table is a chart option: enabled, it
// reaches the SecondaryScheduler and the operator renders it into the profile; disabled, it
// is not there. A plugin added to the table is covered without a line here.
func TestEveryPluginTurnsOnAndOff(t *testing.T) {
	for _, p := range config.Plugins {
		if p.InlineArgs {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			for _, on := range []bool{true, false} {
				// Another plugin stays on (the chart refuses a set with none).
				other := "nodeImageLocality"
				if p.Field == other {
					other = "sySched"
				}
				r := mustRender(t, fmt.Sprintf("scheduler: {plugins: {%s: {enabled: %v, weight: 3}, %s: {enabled: true}}}", p.Field, on, other))
				ss := secondaryScheduler(t, r)
				cfg, yml := operatorConfig(t, ss)
				var weight int32
				for _, pl := range cfg.Profiles[0].Plugins.MultiPoint.Enabled {
					if pl.Name == p.Name {
						weight = pl.Weight
					}
				}
				if (weight == 3) != on {
					t.Errorf("enabled %v: weight in the profile %d:\n%s", on, weight, yml)
				}
			}
		})
	}
}
