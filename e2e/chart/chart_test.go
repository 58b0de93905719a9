package chart

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current chart")

// valueSets are the values files under testdata/values, each rendered as its own release.
var valueSets = []string{"default", "scheduler-only", "prometheus", "ha", "podconfig", "agent-images", "isolation", "rebalancer"}

func releaseOf(name string) (release, ns string) {
	if name == "default" {
		return "berth", "berth-system"
	}
	return name, "berth-" + name
}

func render(t *testing.T, name string) *Rendered {
	t.Helper()
	v, err := ReadValues(filepath.Join("testdata", "values", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rel, ns := releaseOf(name)
	r, err := Render(rel, ns, v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// One source of truth: the chart ships copies of generated/embedded CRDs; any drift fails here.
func TestCRDCopiesMatchSources(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ chartFile, source string }{
		{"charts/berth/crds/berth.dev_secondaryschedulers.yaml", "api/crds/berth.dev_secondaryschedulers.yaml"},
		{"charts/berth/crds/berth.dev_podconfigs.yaml", "api/crds/berth.dev_podconfigs.yaml"},
		{"charts/berth/crds/berth.dev_ipallocations.yaml", "api/crds/berth.dev_ipallocations.yaml"},
		{"charts/berth/crds/berth.dev_podnetworks.yaml", "api/crds/berth.dev_podnetworks.yaml"},
		{"charts/berth/files/spo/seccompprofiles-cluster.yaml", "pkg/scheduler/plugins/sysched/crds/seccompprofiles-cluster.yaml"},
		{"charts/berth/files/spo/profilebindings.yaml", "pkg/scheduler/plugins/sysched/crds/profilebindings.yaml"},
	}
	for _, tc := range cases {
		same, err := Equal(filepath.Join(root, tc.chartFile), filepath.Join(root, tc.source))
		if err != nil {
			t.Fatal(err)
		}
		if !same {
			t.Errorf("%s differs from %s: copy it again (cp %s %s)", tc.chartFile, tc.source, tc.source, tc.chartFile)
		}
	}
	// And nothing else sits in crds/ that would be installed unconditionally: every file there
	// is a copy of a CRD generated from Berth's API (api/crds).
	ents, err := os.ReadDir(filepath.Join(root, "charts/berth/crds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		chartFile, source := filepath.Join(root, "charts/berth/crds", ent.Name()), filepath.Join(root, "api/crds", ent.Name())
		same, err := Equal(chartFile, source)
		if err != nil || !same {
			t.Errorf("charts/berth/crds/%s is not a copy of a generated CRD in api/crds (%v)", ent.Name(), err)
		}
	}
}

func TestGolden(t *testing.T) {
	for _, name := range valueSets {
		t.Run(name, func(t *testing.T) {
			got := render(t, name).All()
			path := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./e2e/chart -run TestGolden -update)", err)
			}
			if got != string(want) {
				t.Errorf("rendered %s differs from %s (rerun with -update after checking the diff):\n%s", name, path, diff(string(want), got))
			}
		})
	}
}

// diff shows the first differing lines.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + a + "\n  got:  " + b
		}
	}
	return ""
}

func TestSchemaRejectsBadValues(t *testing.T) {
	cases := []struct {
		name   string
		values string
		field  string
	}{
		{"weight 0", `scheduler: {plugins: {targetLoadPacking: {weight: 0}}}`, "/scheduler/plugins/targetLoadPacking/weight"},
		{"weight 101", `scheduler: {plugins: {sySched: {weight: 101}}}`, "/scheduler/plugins/sySched/weight"},
		{"unknown source", `loadWatcher: {source: prom}`, "/loadWatcher/source"},
		{"default-scheduler", `scheduler: {schedulerName: default-scheduler}`, "/scheduler/schedulerName"},
		{"scheduler name not DNS-1123", `scheduler: {schedulerName: Berth_Sched}`, "/scheduler/schedulerName"},
		{"pull policy", `operator: {image: {pullPolicy: Sometimes}}`, "/operator/image/pullPolicy"},
		{"bad component tag", `agent: {image: {tag: "-x"}}`, "/agent/image/tag"},
		{"empty global tag", `global: {image: {tag: ""}}`, "/global/image/tag"},
		{"global registry not a registry path", `global: {image: {registry: "Not A Registry"}}`, "/global/image/registry"},
		{"zero scheduler replicas", `scheduler: {replicas: 0}`, "/scheduler/replicas"},
		{"eleven scheduler replicas", `scheduler: {replicas: 11}`, "/scheduler/replicas"},
		{"replicas as string", `operator: {replicas: "2"}`, "/operator/replicas"},
		{"threshold on gpu", `scheduler: {loadAware: {usageThresholds: {gpu: 80}}}`, "/scheduler/loadAware/usageThresholds"},
		{"threshold over 100", `scheduler: {loadAware: {usageThresholds: {cpu: 150}}}`, "/scheduler/loadAware/usageThresholds/cpu"},
		{"target utilisation 0", `scheduler: {plugins: {targetLoadPacking: {args: {targetUtilization: 0}}}}`, "/scheduler/plugins/targetLoadPacking/args/targetUtilization"},
		{"negative variance margin", `scheduler: {plugins: {loadVariationRiskBalancing: {args: {safeVarianceMargin: "-1"}}}}`, "/scheduler/plugins/loadVariationRiskBalancing/args/safeVarianceMargin"},
		{"TargetLoadPacking margin over 10", `scheduler: {plugins: {targetLoadPacking: {args: {varianceMargin: "10.5"}}}}`, "/scheduler/plugins/targetLoadPacking/args/varianceMargin"},
		{"TargetLoadPacking margin not a decimal", `scheduler: {plugins: {targetLoadPacking: {args: {varianceMargin: "1e1"}}}}`, "/scheduler/plugins/targetLoadPacking/args/varianceMargin"},
		{"TargetLoadPacking margin as a number", `scheduler: {plugins: {targetLoadPacking: {args: {varianceMargin: 1}}}}`, "/scheduler/plugins/targetLoadPacking/args/varianceMargin"},
		{"expired action", `scheduler: {loadAware: {expiredMetricsAction: Ignore}}`, "/scheduler/loadAware/expiredMetricsAction"},
		{"neutral score 101", `scheduler: {loadAware: {neutralScore: 101}}`, "/scheduler/loadAware/neutralScore"},
		{"log level", `scheduler: {logLevel: Loud}`, "/scheduler/logLevel"},
		{"management state", `scheduler: {managementState: Paused}`, "/scheduler/managementState"},
		{"spo mode", `spoCRDs: {install: maybe}`, "/spoCRDs/install"},
		{"duration", `agent: {sampleInterval: 1 second}`, "/agent/sampleInterval"},
		{"port", `loadWatcher: {service: {port: 70000}}`, "/loadWatcher/service/port"},
		{"cluster IP", `loadWatcher: {service: {clusterIP: not-an-ip}}`, "/loadWatcher/service/clusterIP"},
		{"prometheus URL without scheme", `loadWatcher: {prometheus: {url: "prometheus:9090"}}`, "/loadWatcher/prometheus/url"},
		{"watcher address without scheme", `scheduler: {loadAware: {watcherAddress: "lw:2020"}}`, "/scheduler/loadAware/watcherAddress"},
		{"unknown key", `operator: {bogus: 1}`, "bogus"},
		{"unknown top-level key", `schedulers: {}`, "schedulers"},
		{"toleration operator", `agent: {tolerations: [{operator: Maybe}]}`, "/agent/tolerations/0/operator"},
		{"relative proc path", `agent: {hostProc: proc}`, "/agent/hostProc"},
		{"relative cgroup path", `agent: {hostCgroup: sys/fs/cgroup}`, "/agent/hostCgroup"},
		// why: "/" would mount the host's whole filesystem into the agent.
		{"cgroup path at the root", `agent: {hostCgroup: /}`, "/agent/hostCgroup"},
		{"cgroup path through ..", `agent: {hostCgroup: /sys/fs/../../etc}`, "/agent/hostCgroup"},
		// why: the socket's directory is mounted; "/x.sock" would mount the host's root.
		{"CRI socket at the root", `agent: {criSocket: /containerd.sock}`, "/agent/criSocket"},
		{"relative CRI socket", `agent: {criSocket: run/containerd/containerd.sock}`, "/agent/criSocket"},
		{"CRI socket through ..", `agent: {criSocket: /run/../containerd.sock}`, "/agent/criSocket"},
		{"max images past the NodeImages limit", `agent: {maxImages: 5001}`, "/agent/maxImages"},
		{"image interval", `agent: {imageInterval: often}`, "/agent/imageInterval"},
		{"operator log level", `operator: {logLevel: verbose}`, "/operator/logLevel"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.values), &v); err != nil {
				t.Fatal(err)
			}
			_, err := Render("berth", "berth-system", v)
			if err == nil {
				t.Fatalf("values %s rendered; want a schema error", tc.values)
			}
			if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

// Combinations the schema cannot express fail in the templates with the value to set.
func TestTemplateRefusesIncoherentValues(t *testing.T) {
	cases := []struct{ name, values, want string }{
		{"prometheus without URL", `loadWatcher: {source: prometheus}`, "loadWatcher.prometheus.url: required"},
		{"no plugin", `scheduler: {plugins: {targetLoadPacking: {enabled: false}, loadVariationRiskBalancing: {enabled: false}, nodeImageLocality: {enabled: false}}}`, "scheduler.plugins: enable at least one"},
		{"agents without watcher", `{loadWatcher: {enabled: false}, scheduler: {enabled: false}}`, "loadWatcher.url: the agents need a load watcher"},
		{"load-aware without watcher", `{loadWatcher: {enabled: false}, agent: {enabled: false}}`, "scheduler.loadAware.watcherAddress: required"},
	}
	for _, tc := range cases {
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

func secondaryScheduler(t *testing.T, r *Rendered) *berthv1alpha1.SecondaryScheduler {
	t.Helper()
	objs, err := Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "SecondaryScheduler" {
			continue
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		ss := &berthv1alpha1.SecondaryScheduler{}
		// Strict: a field the API does not have is a chart bug the API server would prune.
		if err := yaml.UnmarshalStrict(b, ss); err != nil {
			t.Fatalf("SecondaryScheduler does not decode strictly: %v\n%s", err, b)
		}
		return ss
	}
	t.Fatal("no SecondaryScheduler rendered")
	return nil
}

// The chart's SecondaryScheduler goes through the operator's own render+validate path, and the
// configuration carries the plugins and weights the values asked for.
func TestDefaultCRValidatesLikeTheOperator(t *testing.T) {
	want := map[string]map[string]int32{
		"default":        {"TargetLoadPacking": 1},
		"scheduler-only": {"SySched": 3},
		"prometheus":     {"TargetLoadPacking": 5},
		"ha":             {"TargetLoadPacking": 2, "LoadVariationRiskBalancing": 1, "SySched": 1},
		"podconfig":      {"TargetLoadPacking": 1},
		"agent-images":   {"TargetLoadPacking": 1},
		"isolation":      {"TargetLoadPacking": 1, "InstanceIsolation": 10},
		"rebalancer":     {"TargetLoadPacking": 1},
	}
	// Value sets that also render InstanceIsolation's isolated profile (a second one).
	isolated := map[string]string{"isolation": "berth-scheduler-isolated"}
	for _, name := range valueSets {
		t.Run(name, func(t *testing.T) {
			ss := secondaryScheduler(t, render(t, name))
			rendered, err := schedconfig.Render(ss, nil)
			if err != nil {
				t.Fatalf("operator would refuse the chart's SecondaryScheduler: %s", schedconfig.ErrorMessage(err))
			}
			cfg, err := schedconfig.Validate(rendered.YAML)
			if err != nil {
				t.Fatal(err)
			}
			wantProfiles := 1
			if isolated[name] != "" {
				wantProfiles = 2
			}
			if len(cfg.Profiles) != wantProfiles || cfg.Profiles[0].SchedulerName != "berth-scheduler" ||
				wantProfiles == 2 && cfg.Profiles[1].SchedulerName != isolated[name] {
				t.Fatalf("profiles %+v", cfg.Profiles)
			}
			got := map[string]int32{}
			for _, p := range cfg.Profiles[0].Plugins.MultiPoint.Enabled {
				if _, berth := want[name][p.Name]; berth || p.Name == "TargetLoadPacking" || p.Name == "LoadVariationRiskBalancing" || p.Name == "SySched" {
					got[p.Name] = p.Weight
				}
			}
			if len(got) != len(want[name]) {
				t.Errorf("plugins %v, want %v", got, want[name])
			}
			for k, w := range want[name] {
				if got[k] != w {
					t.Errorf("%s weight %d, want %d", k, got[k], w)
				}
			}
		})
	}
	t.Run("watcher address follows the fixed ClusterIP", func(t *testing.T) {
		ss := secondaryScheduler(t, render(t, "ha"))
		if a := ss.Spec.Plugins.TargetLoadPacking.Args.WatcherAddress; a != "http://10.96.100.100:2020" {
			t.Errorf("watcherAddress %q", a)
		}
	})
	t.Run("varianceMargin reaches TargetLoadPacking's args", func(t *testing.T) {
		v := map[string]any{"scheduler": map[string]any{"plugins": map[string]any{"targetLoadPacking": map[string]any{"args": map[string]any{"varianceMargin": "1.5"}}}}}
		r, err := Render("berth", "berth-system", v)
		if err != nil {
			t.Fatal(err)
		}
		ss := secondaryScheduler(t, r)
		if m := ss.Spec.Plugins.TargetLoadPacking.Args.VarianceMargin; m == nil || *m != "1.5" {
			t.Fatalf("varianceMargin %v, want 1.5", m)
		}
		if _, err := schedconfig.Render(ss, nil); err != nil {
			t.Errorf("the operator refuses the rendered margin: %v", err)
		}
	})
	t.Run("values the schema allows but a plugin refuses are caught", func(t *testing.T) {
		// The schema checks shape; the plugin's ParseArgs has the last word (as the operator).
		v := map[string]any{"scheduler": map[string]any{"plugins": map[string]any{"targetLoadPacking": map[string]any{"args": map[string]any{"defaultRequestsMultiplier": "0"}}}}}
		r, err := Render("berth", "berth-system", v)
		if err != nil {
			t.Fatal(err)
		}
		_, err = schedconfig.Render(secondaryScheduler(t, r), nil)
		if err == nil || !strings.Contains(err.Error(), "spec.plugins.targetLoadPacking.args") {
			t.Errorf("want a targetLoadPacking args error, got %v", err)
		}
	})
}

func helmBin(t *testing.T) string {
	t.Helper()
	bin, err := cluster.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(bin, "helm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `make tools` (it builds helm from tools/helm)", p)
	}
	return p
}

func TestHelmLint(t *testing.T) {
	helm := helmBin(t)
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range valueSets {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(helm, "lint", "--strict", dir, "-f", filepath.Join("testdata", "values", name+".yaml")).CombinedOutput()
			if err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "0 chart(s) failed") {
				t.Errorf("helm lint output:\n%s", out)
			}
		})
	}
	t.Run("lint fails on bad values", func(t *testing.T) {
		out, err := exec.Command(helm, "lint", "--strict", dir, "--set", "scheduler.replicas=0").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "/scheduler/replicas") {
			t.Errorf("helm lint accepted scheduler.replicas=0: %v\n%s", err, out)
		}
	})
}

// Every rendered object is applied server-side to a real API server: schemas (built-in and the
// CRDs' with their CEL rules), immutable fields, RBAC references and defaulting all get a say.
func TestApplyServerSide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// No SPO CRDs preinstalled: the chart's own (spoCRDs.install=auto) are applied. The
	// controller manager stays (namespaces get their default ServiceAccount from it).
	c, err := cluster.Start(ctx, cluster.Config{Logf: t.Logf, WithoutKWOK: true, WithoutDefaultScheduler: true,
		WithoutBerthCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	apply := func(t *testing.T, o *unstructured.Unstructured, dryRun bool) error {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			mapper.Reset()
			if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				return err
			}
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		b, err := o.MarshalJSON()
		if err != nil {
			return err
		}
		opts := metav1.PatchOptions{FieldManager: "berth-chart-test", Force: ptrTrue()}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, b, opts)
		return err
	}
	for _, name := range valueSets {
		t.Run(name, func(t *testing.T) {
			r := render(t, name)
			_, ns := releaseOf(name)
			if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
				t.Fatal(err)
			}
			var crds, rest []*unstructured.Unstructured
			for _, crd := range r.CRDs {
				objs, err := Objects(string(crd.File.Data))
				if err != nil {
					t.Fatal(err)
				}
				crds = append(crds, objs...)
			}
			objs, err := Objects(r.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o)
				} else {
					rest = append(rest, o)
				}
			}
			for _, o := range crds {
				if err := apply(t, o, false); err != nil {
					t.Fatalf("CRD %s: %v", o.GetName(), err)
				}
			}
			// Wait for the CRDs to be served before their resources are applied.
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				mapper.Reset()
				_, err := mapper.RESTMapping(berthv1alpha1.GroupVersion.WithKind("SecondaryScheduler").GroupKind(), "v1alpha1")
				return err == nil, nil
			}); err != nil {
				list, lerr := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).List(ctx, metav1.ListOptions{})
				var names []string
				if lerr == nil {
					for _, i := range list.Items {
						names = append(names, i.GetName())
					}
				}
				t.Fatalf("SecondaryScheduler CRD not served (CRDs: %v %v; applied %d)", names, lerr, len(crds))
			}
			kinds := map[string]int{}
			for _, o := range rest {
				if err := apply(t, o, false); err != nil {
					t.Errorf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
					continue
				}
				kinds[o.GetKind()]++
			}
			// Hooks: validated by the server but not persisted (the cleanup Job would delete
			// the SecondaryScheduler just applied).
			for _, h := range r.Hooks {
				hobjs, err := Objects(h.Manifest)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range hobjs {
					if err := apply(t, o, true); err != nil {
						t.Errorf("hook %s %s: %v", o.GetKind(), o.GetName(), err)
					}
				}
			}
			// What the API server holds now is what was applied.
			for _, o := range rest {
				gvk := o.GroupVersionKind()
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Fatal(err)
				}
				var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
				if m.Scope.Name() == "namespace" {
					ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
				}
				if _, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{}); err != nil {
					t.Errorf("%s %s/%s after apply: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
			var summary []string
			for k, n := range kinds {
				summary = append(summary, k+"="+strconv.Itoa(n))
			}
			sort.Strings(summary)
			t.Logf("applied %s", strings.Join(summary, " "))
		})
	}
	t.Run("negative control: the same apply path refuses a bad SecondaryScheduler", func(t *testing.T) {
		// Negative control: the same apply path does refuse a bad object (so green above
		// means accepted, not ignored).
		r := render(t, "default")
		objs, _ := Objects(r.Manifest)
		for _, o := range objs {
			if o.GetKind() != "SecondaryScheduler" {
				continue
			}
			bad := o.DeepCopy()
			bad.SetName("bad")
			_ = unstructured.SetNestedField(bad.Object, "default-scheduler", "spec", "schedulerName")
			err := apply(t, bad, false)
			if err == nil || !apierrors.IsInvalid(err) {
				t.Errorf("want Invalid, got %v", err)
			}
			return
		}
		t.Fatal(errors.New("no SecondaryScheduler"))
	})
}

func ptrTrue() *bool { b := true; return &b }
