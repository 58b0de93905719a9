package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// monitoringAPI is what the Prometheus Operator's CRDs add to discovery; the chart renders
// ServiceMonitors and the PrometheusRule only when it is there.
const monitoringAPI = "monitoring.coreos.com/v1"

// monitoringValues turns every monitoring option on, with every component that has a metric an
// alert or panel reads (isolation webhook, PodConfig attachments).
const monitoringValues = `
scheduler:
  plugins:
    instanceIsolation: {enabled: true}
isolation:
  enabled: true
podConfig:
  enabled: true
agent:
  criSocket: /run/containerd/containerd.sock
rebalancer:
  enabled: true
monitoring:
  serviceMonitors:
    enabled: true
    labels: {release: kube-prometheus}
    prometheusServiceAccount: {name: prometheus-k8s, namespace: monitoring}
  prometheusRule:
    enabled: true
    labels: {release: kube-prometheus}
  dashboards:
    enabled: true
`

// monitoringSets are the monitoring goldens: the same values with and without the API.
var monitoringSets = []struct {
	name    string
	withAPI bool
}{{"monitoring", true}, {"monitoring-no-api", false}}

// renderMonitoring renders like Render, plus monitoring.coreos.com/v1 in the capabilities when
// withAPI (Render's client-only install knows only the built-in APIs). It returns the render
// and NOTES.txt.
func renderMonitoring(t *testing.T, rel, ns, values string, withAPI bool) (*Rendered, string) {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &v); err != nil {
		t.Fatal(err)
	}
	var apis chartutil.VersionSet
	if withAPI {
		apis = chartutil.VersionSet{monitoringAPI, monitoringAPI + "/ServiceMonitor", monitoringAPI + "/PrometheusRule"}
	}
	r, err := RenderWithAPIs(rel, ns, v, apis)
	if err != nil {
		t.Fatalf("rendering %s: %v", rel, err)
	}
	return r, r.Notes
}

func kindsOf(t *testing.T, manifest string) map[string][]string {
	t.Helper()
	objs, err := Objects(manifest)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, o := range objs {
		out[o.GetKind()] = append(out[o.GetKind()], o.GetName())
	}
	return out
}

func TestMonitoringGolden(t *testing.T) {
	for _, set := range monitoringSets {
		t.Run(set.name, func(t *testing.T) {
			r, notes := renderMonitoring(t, "berth", "berth-system", monitoringValues, set.withAPI)
			got := monitoringDocs(r.Manifest, notes)
			path := filepath.Join("testdata", set.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./e2e/chart -run TestMonitoringGolden -update)", err)
			}
			if got != string(want) {
				t.Errorf("rendered %s differs from %s (rerun with -update after checking the diff):\n%s", set.name, path, diff(string(want), got))
			}
		})
	}
}

// monitoringDocs keeps what monitoring adds to a render: the documents of
// templates/monitoring*.yaml and NOTES.txt from its "Monitoring:" paragraph on (as comments).
// Why not the whole render: the rest is the default goldens' business, and would make every
// other chart change churn these files.
func monitoringDocs(manifest, notes string) string {
	var b strings.Builder
	for _, doc := range strings.Split(manifest, "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---\n")
		if strings.HasPrefix(doc, "# Source: berth/templates/monitoring") {
			b.WriteString("---\n" + doc + "\n")
		}
	}
	if i := strings.Index(notes, "Monitoring:"); i >= 0 {
		b.WriteString("---\n# NOTES.txt:\n")
		for _, l := range strings.Split(strings.TrimSpace(notes[i:]), "\n") {
			b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
		}
	}
	return b.String()
}

// With the API every component gets a metrics Service and ServiceMonitor with the settings its
// port needs; without it nothing of the Prometheus Operator is rendered and NOTES says so.
func TestMonitoringObjects(t *testing.T) {
	r, notes := renderMonitoring(t, "berth", "berth-system", monitoringValues, true)
	kinds := kindsOf(t, r.Manifest)
	wantSM := []string{"berth-scheduler-metrics", "berth-operator-metrics", "berth-loadwatcher-metrics", "berth-agent-metrics"}
	if strings.Join(kinds["ServiceMonitor"], ",") != strings.Join(wantSM, ",") {
		t.Errorf("ServiceMonitors %v, want %v", kinds["ServiceMonitor"], wantSM)
	}
	if len(kinds["PrometheusRule"]) != 1 {
		t.Errorf("PrometheusRules %v, want one", kinds["PrometheusRule"])
	}
	objs, err := Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	secure := map[string]bool{"berth-scheduler-metrics": true, "berth-operator-metrics": true}
	var binding, dashboard bool
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceMonitor":
			eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
			// The scheduler also serves /metrics/resources (requests and node allocatable).
			wantPaths := map[string]string{"berth-scheduler-metrics": "/metrics,/metrics/resources"}[o.GetName()]
			if wantPaths == "" {
				wantPaths = "/metrics"
			}
			var paths []string
			for _, e := range eps {
				ep := e.(map[string]any)
				paths = append(paths, fmt.Sprint(ep["path"]))
				_, hasToken := ep["bearerTokenFile"]
				if secure[o.GetName()] {
					tls, _ := ep["tlsConfig"].(map[string]any)
					if ep["scheme"] != "https" || !hasToken || tls["insecureSkipVerify"] != true {
						t.Errorf("%s: %v, want https with the bearer token file and insecureSkipVerify (self-signed)", o.GetName(), ep)
					}
				} else if ep["scheme"] != "http" || hasToken {
					t.Errorf("%s: %v, want plain http without a token", o.GetName(), ep)
				}
			}
			if strings.Join(paths, ",") != wantPaths {
				t.Errorf("%s scrapes %v, want %s", o.GetName(), paths, wantPaths)
			}
			if o.GetLabels()["release"] != "kube-prometheus" {
				t.Errorf("%s lacks monitoring.serviceMonitors.labels: %v", o.GetName(), o.GetLabels())
			}
		case "ClusterRoleBinding":
			if o.GetName() == "berth-metrics-reader" {
				binding = true
				subj, _, _ := unstructured.NestedSlice(o.Object, "subjects")
				if b, _ := json.Marshal(subj); !strings.Contains(string(b), `"name":"prometheus-k8s","namespace":"monitoring"`) {
					t.Errorf("metrics-reader binding subjects %s", b)
				}
			}
		case "ConfigMap":
			if o.GetName() == "berth-dashboard" {
				dashboard = true
				if o.GetLabels()["grafana_dashboard"] != "1" {
					t.Errorf("dashboard ConfigMap lacks the sidecar label: %v", o.GetLabels())
				}
				data, _, _ := unstructured.NestedMap(o.Object, "data")
				var d map[string]any
				if err := json.Unmarshal([]byte(data["berth.json"].(string)), &d); err != nil {
					t.Errorf("dashboard JSON: %v", err)
				}
			}
		}
	}
	if !binding || !dashboard {
		t.Errorf("metrics-reader binding rendered %v, dashboard ConfigMap rendered %v; want both", binding, dashboard)
	}
	if !strings.Contains(notes, "ServiceMonitors berth-<component>-metrics") {
		t.Errorf("NOTES with the API do not name the ServiceMonitors:\n%s", notes)
	}

	r, notes = renderMonitoring(t, "berth", "berth-system", monitoringValues, false)
	kinds = kindsOf(t, r.Manifest)
	for _, k := range []string{"ServiceMonitor", "PrometheusRule"} {
		if len(kinds[k]) > 0 {
			t.Errorf("without %s the chart rendered %s %v", monitoringAPI, k, kinds[k])
		}
	}
	if !strings.Contains(notes, "monitoring.coreos.com/v1 (Prometheus Operator CRDs) is absent") ||
		!strings.Contains(notes, "ServiceMonitors and the PrometheusRule were not rendered") {
		t.Errorf("NOTES without the API do not say what was left out:\n%s", notes)
	}
}

// Off by default, even where the API exists: the default render gains nothing.
func TestMonitoringOffByDefault(t *testing.T) {
	r, notes := renderMonitoring(t, "berth", "berth-system", "{}", true)
	kinds := kindsOf(t, r.Manifest)
	for _, k := range []string{"ServiceMonitor", "PrometheusRule"} {
		if len(kinds[k]) > 0 {
			t.Errorf("default values rendered %s %v", k, kinds[k])
		}
	}
	for _, n := range kinds["ConfigMap"] {
		if strings.HasSuffix(n, "-dashboard") {
			t.Errorf("default values rendered the dashboard ConfigMap %s", n)
		}
	}
	if strings.Contains(notes, "Monitoring:") {
		t.Errorf("default NOTES mention monitoring:\n%s", notes)
	}
}

// helm lint --strict accepts the monitoring values (lint knows no monitoring.coreos.com/v1, so
// this covers the dashboard and the NOTES path).
func TestMonitoringHelmLint(t *testing.T) {
	helm := helmBin(t)
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(t.TempDir(), "monitoring.yaml")
	if err := os.WriteFile(values, []byte(monitoringValues), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(helm, "lint", "--strict", dir, "-f", values).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0 chart(s) failed") {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
}

// values.schema.json refuses monitoring values the templates could not use.
func TestMonitoringSchemaRejects(t *testing.T) {
	cases := []struct{ values, path string }{
		{"monitoring: {prometheusRule: {staleNodesRatio: 2}}", "/monitoring/prometheusRule/staleNodesRatio"},
		{"monitoring: {prometheusRule: {watcherUnreachableFor: soon}}", "/monitoring/prometheusRule/watcherUnreachableFor"},
		{"monitoring: {serviceMonitors: {interval: 0.5}}", "/monitoring/serviceMonitors/interval"},
		{"monitoring: {serviceMonitors: {bearerTokenFile: token}}", "/monitoring/serviceMonitors/bearerTokenFile"},
		{"monitoring: {dashboards: {label: x}}", "/monitoring/dashboards"},
	}
	for _, tc := range cases {
		v := map[string]any{}
		if err := yaml.Unmarshal([]byte(tc.values), &v); err != nil {
			t.Fatal(err)
		}
		_, err := Render("berth", "berth-system", v)
		if err == nil || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: %v, want a schema error at %s", tc.values, err, tc.path)
		}
	}
	// A Prometheus ServiceAccount without its namespace cannot be bound.
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte("monitoring: {serviceMonitors: {enabled: true, prometheusServiceAccount: {name: prom, namespace: \"\"}}}"), &v); err != nil {
		t.Fatal(err)
	}
	if _, err := RenderWithAPIs("berth", "berth-system", v, chartutil.VersionSet{monitoringAPI}); err == nil || !strings.Contains(err.Error(), "prometheusServiceAccount.namespace") {
		t.Errorf("a Prometheus ServiceAccount without namespace: %v, want the template to refuse it", err)
	}
}
