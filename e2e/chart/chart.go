// Package chart renders, applies and installs charts/berth with the Helm v3 Go SDK, for the
// chart tests in this package and the helm end-to-end suite.
package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"
)

// KubeVersion is what client-only renders assume (the local cluster's version).
const KubeVersion = "v1.37.1"

// RepoRoot finds the repository root (the directory holding go.work) from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s", dir)
		}
	}
}

// Dir is charts/berth in the repository.
func Dir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "charts", "berth"), nil
}

// Load loads charts/berth.
func Load() (*chart.Chart, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	return loader.Load(dir)
}

// ReadValues reads a values file.
func ReadValues(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v := map[string]any{}
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// Rendered is a client-side render: the release manifest and the hooks.
type Rendered struct {
	Manifest string
	Hooks    []*release.Hook
	// CRDs from the chart's crds/ directory.
	CRDs []chart.CRD
	// Notes is the rendered NOTES.txt.
	Notes string
}

// All is every document (crds/, templates, hooks) in a stable order with its source path, as
// the golden files hold it.
func (r *Rendered) All() string {
	var b strings.Builder
	for _, c := range r.CRDs {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s", c.Filename, strings.TrimPrefix(string(c.File.Data), "---\n"))
	}
	b.WriteString(strings.TrimSpace(r.Manifest) + "\n")
	hooks := append([]*release.Hook(nil), r.Hooks...)
	sort.Slice(hooks, func(i, j int) bool { return hooks[i].Path+hooks[i].Name < hooks[j].Path+hooks[j].Name })
	for _, h := range hooks {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, strings.TrimSpace(h.Manifest))
	}
	return b.String()
}

// Objects parses every document of a manifest into unstructured objects.
func Objects(manifest string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// Render renders the chart client-side (no cluster: `lookup` finds nothing) as release name in
// namespace ns, validating values against values.schema.json as `helm install` does.
func Render(release, ns string, values map[string]any) (*Rendered, error) {
	return RenderWithAPIs(release, ns, values, nil)
}

// RenderWithAPIs is Render on a cluster that also serves apis (group/version, or
// group/version/Kind), as .Capabilities.APIVersions tells the templates.
func RenderWithAPIs(release, ns string, values map[string]any, apis chartutil.VersionSet) (*Rendered, error) {
	ch, err := Load()
	if err != nil {
		return nil, err
	}
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = release, ns
	inst.KubeVersion = kv
	inst.APIVersions = apis
	rel, err := inst.Run(ch, values)
	if err != nil {
		return nil, err
	}
	return &Rendered{Manifest: rel.Manifest, Hooks: rel.Hooks, CRDs: ch.CRDObjects(), Notes: rel.Info.Notes}, nil
}

// Getter is a RESTClientGetter for a kubeconfig file and namespace.
func Getter(kubeconfig, ns string) genericclioptions.RESTClientGetter {
	f := genericclioptions.NewConfigFlags(false)
	f.KubeConfig = &kubeconfig
	f.Namespace = &ns
	return f
}

// Config initialises a Helm action configuration against a cluster (release storage: Secrets).
func Config(kubeconfig, ns string, logf func(string, ...any)) (*action.Configuration, error) {
	cfg := &action.Configuration{}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := cfg.Init(Getter(kubeconfig, ns), ns, "secret", logf); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Install runs `helm install --wait` of charts/berth.
func Install(ctx context.Context, cfg *action.Configuration, release, ns string, values map[string]any, timeout time.Duration) (*release.Release, error) {
	ch, err := Load()
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace = release, ns
	inst.CreateNamespace = true
	inst.Wait, inst.Timeout = true, timeout
	return inst.RunWithContext(ctx, ch, values)
}

// Upgrade runs `helm upgrade --wait` of charts/berth with values (not reusing the old ones).
func Upgrade(ctx context.Context, cfg *action.Configuration, release, ns string, values map[string]any, timeout time.Duration) (*release.Release, error) {
	ch, err := Load()
	if err != nil {
		return nil, err
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = ns
	up.Wait, up.Timeout = true, timeout
	return up.RunWithContext(ctx, release, ch, values)
}

// Uninstall runs `helm uninstall --wait`.
func Uninstall(cfg *action.Configuration, release string, timeout time.Duration) error {
	un := action.NewUninstall(cfg)
	un.Wait, un.Timeout = true, timeout
	res, err := un.Run(release)
	if err != nil {
		return err
	}
	if res != nil && strings.TrimSpace(res.Info) != "" {
		return errors.New(res.Info)
	}
	return nil
}

// MergeValues deep-merges overrides onto base (maps merge, everything else replaces).
func MergeValues(base, overrides map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range overrides {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = MergeValues(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// Equal reports whether two files have the same content, ignoring nothing.
func Equal(a, b string) (bool, error) {
	x, err := os.ReadFile(a)
	if err != nil {
		return false, err
	}
	y, err := os.ReadFile(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(x, y), nil
}

// AgentClusterRole is the chart's berth-agent ClusterRole with PodConfig on (which needs a CRI
// socket): what the suites and the demo grant an agent run as a process.
func AgentClusterRole(criSocket string) (*rbacv1.ClusterRole, error) {
	r, err := Render("berth", "berth-system", map[string]any{
		"podConfig": map[string]any{"enabled": true, "clusterCIDRs": []any{"10.244.0.0/16"}},
		"agent":     map[string]any{"criSocket": criSocket}})
	if err != nil {
		return nil, err
	}
	objs, err := Objects(r.Manifest)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == "berth-agent" {
			var role rbacv1.ClusterRole
			err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role)
			return &role, err
		}
	}
	return nil, fmt.Errorf("the chart renders no berth-agent ClusterRole")
}
