package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/e2e/chart"
)

// release and namespace the suite renders the chart as: the Prometheus jobs are then
// berth-<component>-metrics, as in e2e/chart's goldens.
const (
	release   = "berth"
	namespace = "berth-system"
)

// testValues turn monitoring on with intervals a test can wait for: 1 s scrapes, the watcher
// alert after 3 s without a fetch plus 5 s of `for`, the stale alert at half the nodes for 3 s.
const testValues = `
monitoring:
  serviceMonitors:
    enabled: true
    interval: 1s
  prometheusRule:
    enabled: true
    watcherUnreachableSeconds: 3
    watcherUnreachableFor: 5s
    staleNodesRatio: 0.5
    staleNodesFor: 3s
    noLeaderFor: 2s
  dashboards:
    enabled: true
# The webhook, so the dashboard's admissions panel has requests to show (ipp mode needs no
# scheduler profile of its own).
isolation:
  enabled: true
  mode: ipp
`

// rendered is what the suite takes from the chart.
type rendered struct {
	// ServiceMonitor endpoints by job (the ServiceMonitor's, i.e. its Service's, name).
	endpoints map[string][]map[string]any
	// rules is the PrometheusRule's spec as a Prometheus rule file.
	rules []byte
	// metricsReader is ClusterRole <release>-metrics-reader.
	metricsReader *unstructured.Unstructured
	// dashboard is files/dashboards/berth.json as the ConfigMap carries it.
	dashboard string
	// objs is every object the chart rendered.
	objs []*unstructured.Unstructured
}

// render renders charts/berth client-side as if the Prometheus Operator's API existed.
func render() (*rendered, error) {
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(testValues), &v); err != nil {
		return nil, err
	}
	ch, err := chart.Load()
	if err != nil {
		return nil, err
	}
	kv, err := chartutil.ParseKubeVersion(chart.KubeVersion)
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace, inst.KubeVersion = release, namespace, kv
	inst.APIVersions = chartutil.VersionSet{"monitoring.coreos.com/v1"}
	rel, err := inst.Run(ch, v)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	objs, err := chart.Objects(rel.Manifest)
	if err != nil {
		return nil, err
	}
	out := &rendered{endpoints: map[string][]map[string]any{}, objs: objs}
	for _, o := range objs {
		switch {
		case o.GetKind() == "ServiceMonitor":
			eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
			if len(eps) == 0 {
				return nil, fmt.Errorf("ServiceMonitor %s has no endpoints", o.GetName())
			}
			for _, ep := range eps {
				out.endpoints[o.GetName()] = append(out.endpoints[o.GetName()], ep.(map[string]any))
			}
		case o.GetKind() == "PrometheusRule":
			spec, _, _ := unstructured.NestedMap(o.Object, "spec")
			if out.rules, err = yaml.Marshal(spec); err != nil {
				return nil, err
			}
		case o.GetKind() == "ClusterRole" && o.GetName() == release+"-metrics-reader":
			out.metricsReader = o
		case o.GetKind() == "ConfigMap" && o.GetName() == release+"-dashboard":
			out.dashboard, _, _ = unstructured.NestedString(o.Object, "data", "berth.json")
		}
	}
	if out.rules == nil || out.metricsReader == nil || out.dashboard == "" {
		return nil, fmt.Errorf("the chart rendered no PrometheusRule (%v), metrics-reader ClusterRole (%v) or dashboard (%v)",
			out.rules != nil, out.metricsReader != nil, out.dashboard != "")
	}
	return out, nil
}

// scrapeJob is the Prometheus scrape_configs translated from a rendered ServiceMonitor's
// endpoints, as the Prometheus Operator would generate them (one config per endpoint, each
// labelled job=<Service>), with loopback targets instead of the Service's endpoints and
// tokenFile standing in for the token mounted in Prometheus' pod.
func scrapeJob(job string, eps []map[string]any, targets []string, tokenFile string) (string, error) {
	var b strings.Builder
	for i, ep := range eps {
		sc, err := scrapeEndpoint(fmt.Sprintf("%s/%d", job, i), job, ep, targets, tokenFile)
		if err != nil {
			return "", err
		}
		b.WriteString(sc)
	}
	return b.String(), nil
}

func scrapeEndpoint(name, job string, ep map[string]any, targets []string, tokenFile string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "  - job_name: %s\n", name)
	fmt.Fprintf(&b, "    scrape_interval: %v\n", ep["interval"])
	fmt.Fprintf(&b, "    scheme: %v\n", ep["scheme"])
	fmt.Fprintf(&b, "    metrics_path: %v\n", ep["path"])
	if _, ok := ep["bearerTokenFile"]; ok {
		if tokenFile == "" {
			return "", fmt.Errorf("job %s wants a bearer token and the suite has none", job)
		}
		fmt.Fprintf(&b, "    authorization:\n      credentials_file: %s\n", tokenFile)
	}
	if tls, ok := ep["tlsConfig"].(map[string]any); ok {
		fmt.Fprintf(&b, "    tls_config:\n      insecure_skip_verify: %v\n", tls["insecureSkipVerify"] == true)
	}
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = strconv.Quote(t)
	}
	fmt.Fprintf(&b, "    static_configs:\n      - targets: [%s]\n        labels: {job: %s}\n", strings.Join(quoted, ", "), job)
	return b.String(), nil
}

func writeFile(dir, name string, data []byte) (string, error) {
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, data, 0o600)
}
