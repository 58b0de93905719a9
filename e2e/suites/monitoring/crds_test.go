package monitoring

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// promOperatorVersion is the Prometheus Operator whose own CRDs (example/prometheus-operator-crd)
// the test installs: the schemas users' clusters validate the chart's objects against.
const promOperatorVersion = "v0.85.0"

// promOperatorCRDs downloads the Prometheus Operator's module through the Go module proxy (in a
// throwaway module, so Berth's go.mod and go.work stay untouched) and reads the CRDs.
func promOperatorCRDs(t *testing.T, files ...string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := framework.ModuleCRDs(t.TempDir(), "github.com/prometheus-operator/prometheus-operator", promOperatorVersion, "example/prometheus-operator-crd", files...)
	if err != nil {
		t.Fatal(err)
	}
	return crds
}

// installChartCRDs installs the chart's crds/ (Berth's API), as `helm install` would before
// the templates: the operator watches them, and a server dry run maps the chart's
// SecondaryScheduler through them.
func installChartCRDs(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ch, err := chart.Load()
	if err != nil {
		t.Fatal(err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range ch.CRDObjects() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(f.File.Data, crd); err != nil {
			t.Fatalf("%s: %v", f.Filename, err)
		}
		crds = append(crds, crd)
	}
	if err := cluster.InstallCRDs(ctx, c.RESTConfig, crds...); err != nil {
		t.Fatal(err)
	}
}

// serverRender is `helm install --dry-run=server` of the chart with testValues: capabilities
// come from the API server's discovery, and every object is checked against its OpenAPI schema.
// Each call has its own discovery cache directory, so a render never sees stale discovery.
func serverRender(t *testing.T, c *cluster.Cluster) (manifest, notes string) {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(testValues), &v); err != nil {
		t.Fatal(err)
	}
	ch, err := chart.Load()
	if err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns, cache := c.Kubeconfig, namespace, t.TempDir()
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kc, &ns, &cache
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, namespace, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(cfg)
	inst.DryRunOption = "server"
	inst.ReleaseName, inst.Namespace = release, namespace
	rel, err := inst.Run(ch, v)
	if err != nil {
		t.Fatalf("helm install --dry-run=server: %v", err)
	}
	return rel.Manifest, rel.Info.Notes
}

// The chart against a real API server: without the Prometheus Operator's CRDs it renders no
// ServiceMonitor or PrometheusRule and NOTES says so; with the operator's own CRDs installed it
// renders them, and the API server accepts each one (server-side apply, dry run, strict field
// validation: an unknown or misspelt field fails).
func TestChartAgainstPrometheusOperatorCRDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := shared
	crds := promOperatorCRDs(t, "monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml")

	installChartCRDs(ctx, t, c)
	manifest, notes := serverRender(t, c)
	for _, kind := range []string{"kind: ServiceMonitor", "kind: PrometheusRule"} {
		if strings.Contains(manifest, kind) {
			t.Errorf("without the Prometheus Operator's CRDs the chart rendered %s", kind)
		}
	}
	if !strings.Contains(notes, "monitoring.coreos.com/v1 (Prometheus Operator CRDs) is absent") {
		t.Errorf("NOTES without the CRDs do not say they are absent:\n%s", notes)
	}

	if err := cluster.InstallCRDs(ctx, c.RESTConfig, crds...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Leave the shared cluster as the other tests found it.
		ext, err := apiextensionsclient.NewForConfig(c.RESTConfig)
		if err != nil {
			t.Error(err)
			return
		}
		for _, crd := range crds {
			if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting CRD %s: %v", crd.Name, err)
			}
		}
	})

	manifest, _ = serverRender(t, c)
	objs, err := chart.Objects(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, namespace); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, o := range objs {
		var res string
		switch o.GetKind() {
		case "ServiceMonitor":
			res = "servicemonitors"
		case "PrometheusRule":
			res = "prometheusrules"
		default:
			continue
		}
		counts[o.GetKind()]++
		body, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: res}
		force := true
		if _, err := dyn.Resource(gvr).Namespace(namespace).Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
			FieldManager: "berth-e2e", Force: &force, DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict",
		}); err != nil {
			t.Errorf("the API server refuses %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if counts["ServiceMonitor"] != 4 || counts["PrometheusRule"] != 1 {
		t.Errorf("with the CRDs the chart rendered %v, want 4 ServiceMonitors and 1 PrometheusRule", counts)
	}
}
