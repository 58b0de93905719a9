package schedconfig

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

func cr(plugins *berthv1alpha1.PluginSet, ref *berthv1alpha1.ConfigMapKeyReference) *berthv1alpha1.SecondaryScheduler {
	return &berthv1alpha1.SecondaryScheduler{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "berth-system"},
		Spec: berthv1alpha1.SecondarySchedulerSpec{SchedulerName: "berth-scheduler", Plugins: plugins,
			ConfigMapRef: ref, Image: "berth-scheduler:dev"},
	}
}

func tlp(addr string, target int64) *berthv1alpha1.PluginSet {
	return &berthv1alpha1.PluginSet{TargetLoadPacking: &berthv1alpha1.TargetLoadPackingPlugin{
		Weight: berthv1alpha1.Weight{Weight: ptr.To[int32](3)},
		Args: configv1.TargetLoadPackingArgs{
			LoadAwareArgs:     configv1.LoadAwareArgs{WatcherAddress: addr},
			TargetUtilization: ptr.To(target),
		},
	}}
}

var ref = &berthv1alpha1.ConfigMapKeyReference{Name: "raw", Key: "config.yaml"}

func TestRender(t *testing.T) {
	all := tlp("http://berth-loadwatcher:2020", 60)
	all.LoadVariationRiskBalancing = &berthv1alpha1.LoadVariationRiskBalancingPlugin{Args: configv1.LoadVariationRiskBalancingArgs{
		LoadAwareArgs: configv1.LoadAwareArgs{WatcherAddress: "http://berth-loadwatcher:2020"}, SafeVarianceMargin: configv1.NewDecimal("1.5")}}
	all.SySched = &berthv1alpha1.SySchedPlugin{Args: configv1.SySchedArgs{DaemonSetPods: "Count"}}
	all.DisableDefaultScore = true
	badLVRB := tlp("http://w:1", 50)
	badLVRB.LoadVariationRiskBalancing = &berthv1alpha1.LoadVariationRiskBalancingPlugin{Args: configv1.LoadVariationRiskBalancingArgs{
		LoadAwareArgs: configv1.LoadAwareArgs{WatcherAddress: "ftp://w"}}}

	cases := []struct {
		name string
		ss   *berthv1alpha1.SecondaryScheduler
		raw  string
		// wantErr are substrings of the error; empty means the render must succeed.
		wantErr []string
		// wantYAML are substrings of the rendered configuration.
		wantYAML   []string
		notConfig  bool
		wantAbsent []string
	}{
		{name: "good structured plugins", ss: cr(all, nil),
			wantYAML: []string{"schedulerName: berth-scheduler", "name: TargetLoadPacking", "weight: 3",
				"targetUtilization: 60", `safeVarianceMargin: "1.5"`, "name: SySched", "daemonSetPods: Count", "resourceName: berth-scheduler",
				"resourceNamespace: berth-system", "name: NodeResourcesBalancedAllocation"}},
		// The CRD cannot check URL shape; the plugin's ParseArgs does, and the error names the
		// CR field the user edits.
		{name: "bad TLP watcherAddress names the field", ss: cr(tlp("not a url", 50), nil),
			wantErr: []string{"spec.plugins.targetLoadPacking.args", "watcherAddress", "not a url"}},
		{name: "bad TLP target names the field", ss: cr(tlp("http://w:1", 250), nil),
			wantErr: []string{"spec.plugins.targetLoadPacking.args", "targetUtilization"}},
		{name: "second plugin's error maps to its own field", ss: cr(badLVRB, nil),
			wantErr: []string{"spec.plugins.loadVariationRiskBalancing.args", "watcherAddress"}},
		{name: "neither plugins nor configMapRef", ss: cr(nil, nil), wantErr: []string{"set one of plugins and configMapRef"}},
		{name: "raw good, operator owns lease and connection", ss: cr(nil, ref), raw: `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /root/.kube/config
leaderElection:
  resourceName: someone-elses-lease
profiles:
- schedulerName: berth-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: SySched
  pluginConfig:
  - name: SySched
    args:
      defaultProfileName: all-syscalls
`, wantYAML: []string{"resourceName: berth-scheduler", "name: SySched"}, wantAbsent: []string{"someone-elses-lease", "/root/.kube/config"}},
		{name: "raw unknown plugin", ss: cr(nil, ref), raw: `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: berth-scheduler
  plugins:
    score:
      enabled:
      - name: NoSuchPlugin
`, wantErr: []string{"spec.configMapRef: ConfigMap berth-system/raw key config.yaml", "profiles[0].plugins.score.enabled[0].name", "NoSuchPlugin", "no such plugin"}},
		{name: "raw misspelt TLP arg", ss: cr(nil, ref), raw: `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: berth-scheduler
  pluginConfig:
  - name: TargetLoadPacking
    args:
      watcherAddress: http://w:2020
      targetUtilisation: 70
`, wantErr: []string{"profiles[0].pluginConfig[0].args", "targetUtilisation"}},
		{name: "raw upstream validation", ss: cr(nil, ref), raw: `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 200
profiles:
- schedulerName: berth-scheduler
`, wantErr: []string{"percentageOfNodesToScore"}},
		{name: "raw strict decoding", ss: cr(nil, ref), raw: `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profilez: []
`, wantErr: []string{"profilez", "strict decoding"}},
		{name: "raw without the scheduler's profile", ss: cr(nil, ref), raw: `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: other
`, wantErr: []string{`no profile has schedulerName "berth-scheduler"`}},
		{name: "raw is a Deployment", ss: cr(nil, ref), raw: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
			wantErr: []string{"not a KubeSchedulerConfiguration", "apps/v1"}, notConfig: true},
		{name: "raw is not YAML", ss: cr(nil, ref), raw: "{{{", wantErr: []string{"not a KubeSchedulerConfiguration"}, notConfig: true},
		{name: "raw is empty", ss: cr(nil, ref), raw: "", wantErr: []string{"not a KubeSchedulerConfiguration", "empty"}, notConfig: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Render(tc.ss, []byte(tc.raw))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Render succeeded, want error containing %q; config:\n%s", tc.wantErr, r.YAML)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				var nc *NotConfigError
				if errors.As(err, &nc) != tc.notConfig {
					t.Errorf("NotConfigError = %v, want %v (%v)", !tc.notConfig, tc.notConfig, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.wantYAML {
				if !strings.Contains(string(r.YAML), w) {
					t.Errorf("rendered config lacks %q:\n%s", w, r.YAML)
				}
			}
			for _, w := range tc.wantAbsent {
				if strings.Contains(string(r.YAML), w) {
					t.Errorf("rendered config still has %q:\n%s", w, r.YAML)
				}
			}
			// What was rendered is what the scheduler loads: validate it again from bytes.
			if _, err := Validate(r.YAML); err != nil {
				t.Errorf("rendered config does not validate: %v", err)
			}
			if r.Hash != Hash(r.YAML) || len(r.Hash) != 16 {
				t.Errorf("hash %q does not match content", r.Hash)
			}
		})
	}
}

// The hash is a function of the content only: the same spec renders the same bytes, and an
// args change changes the hash (that is what rolls the Deployment).
func TestHashFollowsContent(t *testing.T) {
	a, err := Render(cr(tlp("http://w:1", 40), nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(cr(tlp("http://w:1", 40), nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Render(cr(tlp("http://w:1", 41), nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash {
		t.Errorf("same spec, different hashes %s %s", a.Hash, b.Hash)
	}
	if a.Hash == c.Hash {
		t.Errorf("different args, same hash %s", a.Hash)
	}
}

func TestKnownPluginsIncludeBerthAndInTree(t *testing.T) {
	known := KnownPlugins()
	for _, n := range []string{"TargetLoadPacking", "LoadVariationRiskBalancing", "SySched", "NodeResourcesFit", "DefaultBinder"} {
		if !known[n] {
			t.Errorf("%s not known", n)
		}
	}
}

// disableDefaultScore also drops PodTopologySpread's system default constraints (which spread
// every workload's replicas, against packing), as the scheduler loads the configuration: its
// args are List with no constraints; without it they are upstream's (System).
func TestDisableDefaultScoreDropsImplicitSpreading(t *testing.T) {
	for _, disable := range []bool{true, false} {
		ps := tlp("http://w:1", 60)
		ps.DisableDefaultScore = disable
		r, err := Render(cr(ps, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(r.YAML)
		if err != nil {
			t.Fatalf("%v\n%s", err, r.YAML)
		}
		var got *kconfig.PodTopologySpreadArgs
		for _, pc := range cfg.Profiles[0].PluginConfig {
			if a, ok := pc.Args.(*kconfig.PodTopologySpreadArgs); ok {
				got = a
			}
		}
		want := kconfig.SystemDefaulting
		if disable {
			want = kconfig.ListDefaulting
		}
		if got == nil || got.DefaultingType != want || (disable && len(got.DefaultConstraints) != 0) {
			t.Errorf("disableDefaultScore %v: PodTopologySpread args %+v, want defaulting %s%s", disable, got, want, map[bool]string{true: " with no constraints"}[disable])
		}
	}
}
