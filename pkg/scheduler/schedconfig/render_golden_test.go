package schedconfig

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite testdata/all-plugins.golden.yaml from Render")

// allPlugins is a SecondaryScheduler with every plugin and most args set, as the API server
// hands it to the operator (JSON decoded into the CR types).
const allPlugins = `
apiVersion: berth.dev/v1alpha1
kind: SecondaryScheduler
metadata: {name: s, namespace: berth-system}
spec:
  image: x
  schedulerName: berth-scheduler
  plugins:
    disableDefaultScore: true
    targetLoadPacking:
      weight: 3
      args: {watcherAddress: "http://lw:2020/", targetUtilization: 60, defaultRequestsMultiplier: "2", defaultRequests: {cpu: 500m}, usageThresholds: {cpu: 80}, expiredMetricsAction: Block}
    loadVariationRiskBalancing:
      args: {watcherAddress: "http://lw:2020", safeVarianceMargin: "1.0", safeVarianceSensitivity: "0.5", neutralScore: 20}
    sySched:
      args: {daemonSetPods: Count, excludedPodSelector: {matchLabels: {a: b}}}
    nodeImageLocality:
      weight: 5
      args: {useNodeStatus: false}
    instanceIsolation:
      weight: 10
      isolatedProfileName: iso
      args: {classLabels: [ipp-class], strict: true, exemptNamespaces: [kube-system]}
    decisionRecord: {records: 50, topNodes: 3, summary: Event}
`

// TestRenderGolden: the bytes the operator writes for a CR (and so status.configHash and the
// Deployment's rollout) change only when meant to. The golden was rendered before the args
// were defined once (the typed renderer writes the same bytes as the map-based one did).
func TestRenderGolden(t *testing.T) {
	var ss berthv1alpha1.SecondaryScheduler
	if err := yaml.UnmarshalStrict([]byte(allPlugins), &ss); err != nil {
		t.Fatal(err)
	}
	r, err := Render(&ss, nil)
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/all-plugins.golden.yaml"
	if *update {
		if err := os.WriteFile(golden, r.YAML, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.YAML, want) {
		t.Fatalf("rendered configuration differs from %s (rerun with -update after checking the diff):\n%s", golden, r.YAML)
	}
}

// TestRenderNamesTheCRField: the operator validates a CR's args with the scheduler's own
// validation at the CR's path, so each error names the field the user edits, exactly.
func TestRenderNamesTheCRField(t *testing.T) {
	for _, tc := range []struct{ plugins, want string }{
		{`{targetLoadPacking: {args: {watcherAddress: "http://w:1", targetUtilization: 250}}}`,
			"spec.plugins.targetLoadPacking.args.targetUtilization: Invalid value: 250: must be a percentage between 1 and 100"},
		{`{targetLoadPacking: {args: {watcherAddress: "http://w:1", defaultRequestsMultiplier: "x"}}}`,
			`spec.plugins.targetLoadPacking.args.defaultRequestsMultiplier: Invalid value: "x"`},
		{`{loadVariationRiskBalancing: {args: {watcherAddress: "ftp://w"}}}`,
			`spec.plugins.loadVariationRiskBalancing.args.watcherAddress: Invalid value: "ftp://w"`},
		{`{sySched: {args: {defaultProfileName: "Not_A_Name"}}}`,
			`spec.plugins.sySched.args.defaultProfileName: Invalid value: "Not_A_Name"`},
		{`{nodeImageLocality: {args: {assumePulledFor: 2h}}}`,
			`spec.plugins.nodeImageLocality.args.assumePulledFor: Invalid value: "2h0m0s"`},
		{`{instanceIsolation: {args: {exemptNamespaces: [a, a]}}}`,
			`spec.plugins.instanceIsolation.args.exemptNamespaces[1]: Duplicate value: "a"`},
		{`{sySched: {}, decisionRecord: {topNodes: 0}}`,
			"spec.plugins.decisionRecord.topNodes: Invalid value: 0"},
	} {
		var ss berthv1alpha1.SecondaryScheduler
		doc := "metadata: {name: s, namespace: n}\nspec: {image: x, plugins: " + tc.plugins + "}\n"
		if err := yaml.UnmarshalStrict([]byte(doc), &ss); err != nil {
			t.Fatal(err)
		}
		_, err := Render(&ss, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.plugins, err, tc.want)
		}
	}
}
