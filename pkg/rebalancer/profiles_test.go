package rebalancer

import (
	"context"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/operator"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

func secondary(name, schedulerName string, ps *berthv1alpha1.PluginSet) *berthv1alpha1.SecondaryScheduler {
	return &berthv1alpha1.SecondaryScheduler{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "berth-system"},
		Spec: berthv1alpha1.SecondarySchedulerSpec{SchedulerName: schedulerName, Plugins: ps, Image: "berth-scheduler:dev"}}
}

// rendered is the ConfigMap the operator writes for ss.
func rendered(t *testing.T, ss *berthv1alpha1.SecondaryScheduler) *corev1.ConfigMap {
	t.Helper()
	r, err := schedconfig.Render(ss, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ss.Namespace, Name: operator.ConfigMapName(ss)},
		Data: map[string]string{operator.ConfigKey: string(r.YAML)}}
}

const rawStrictTeam = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: raw-a
    plugins:
      filter:
        enabled: [{name: InstanceIsolation}]
    pluginConfig:
      - name: InstanceIsolation
        args: {classLabels: [team], strict: true}
  - schedulerName: raw-b
    plugins:
      multiPoint:
        enabled: [{name: InstanceIsolation}]
      filter:
        disabled: [{name: "*"}]
`

// TestProfileIsolation: each profile's InstanceIsolation is read as the scheduler will run it,
// from the operator's rendering of structured plugins and from a raw configuration.
func TestProfileIsolation(t *testing.T) {
	iso := func(args configv1.InstanceIsolationArgs, profile string) *berthv1alpha1.PluginSet {
		return &berthv1alpha1.PluginSet{InstanceIsolation: &berthv1alpha1.InstanceIsolationPlugin{IsolatedProfileName: profile, Args: args}}
	}
	cases := []struct {
		name string
		data func(t *testing.T) string
		want string // profile=off|strict/labels, sorted by profile
	}{
		{"no InstanceIsolation", func(t *testing.T) string {
			return rendered(t, secondary("s", "berth-scheduler", &berthv1alpha1.PluginSet{NodeImageLocality: &berthv1alpha1.NodeImageLocalityPlugin{}})).Data[operator.ConfigKey]
		}, "berth-scheduler=off"},
		{"defaults", func(t *testing.T) string {
			return rendered(t, secondary("s", "berth-scheduler", iso(configv1.InstanceIsolationArgs{}, ""))).Data[operator.ConfigKey]
		}, "berth-scheduler=false/ipp-class,berth.dev/instance-class"},
		{"strict with an isolated profile", func(t *testing.T) string {
			return rendered(t, secondary("s", "berth-scheduler", iso(configv1.InstanceIsolationArgs{Strict: ptr.To(true)}, "iso"))).Data[operator.ConfigKey]
		}, "berth-scheduler=true/ipp-class,berth.dev/instance-class iso=true/ipp-class,berth.dev/instance-class"},
		{"raw: Filter enabled with args; MultiPoint under a Filter disabled '*'", func(*testing.T) string { return rawStrictTeam },
			"raw-a=true/team raw-b=off"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := schedconfig.Load([]byte(tc.data(t)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ProfileIsolation(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if s := isolationString(got); s != tc.want {
				t.Fatalf("got %s, want %s", s, tc.want)
			}
		})
	}
	t.Run("bad args are an error naming the profile", func(t *testing.T) {
		cfg, err := schedconfig.Load([]byte(strings.Replace(rawStrictTeam, "[team]", `["not a key"]`, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ProfileIsolation(cfg); err == nil || !strings.Contains(err.Error(), "profile raw-a") {
			t.Fatalf("err = %v, want one naming profile raw-a", err)
		}
	})
}

func isolationString(m map[string]Isolation) string {
	var out []string
	for name, iso := range m {
		if iso.Off {
			out = append(out, name+"=off")
			continue
		}
		out = append(out, name+"="+map[bool]string{true: "true", false: "false"}[*iso.Args.Strict]+"/"+strings.Join(iso.Args.ClassLabels, ","))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestFitterProfiles: a moved pod meets its own profile's InstanceIsolation verdict; a pod of
// a profile that was not read meets the defaults.
func TestFitterProfiles(t *testing.T) {
	ctx := context.Background()
	cfg, err := schedconfig.Load([]byte(rawStrictTeam))
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := ProfileIsolation(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base, err := NewFitter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fit := base.WithProfiles(ctx, profiles)
	n := node("n", "10", "100Gi")
	classA := pod("app", "resident", "n", "1", "1Gi", label("berth.dev/instance-class", "a"))
	teamA := pod("app", "resident", "n", "1", "1Gi", label("team", "a"))
	cases := []struct {
		name     string
		resident *corev1.Pod
		mover    *corev1.Pod
		want     bool
	}{
		{"default reading: another class refused", classA, pod("app", "m", "x", "1", "1Gi", label("berth.dev/instance-class", "b"), scheduler("unread")), false},
		{"default reading: unclassed beside a class allowed (not strict)", classA, pod("app", "m", "x", "1", "1Gi", scheduler("unread")), true},
		{"profile without InstanceIsolation: another class allowed", classA, pod("app", "m", "x", "1", "1Gi", label("berth.dev/instance-class", "b"), scheduler("raw-b")), true},
		{"strict profile: unclassed beside its class label refused", teamA, pod("app", "m", "x", "1", "1Gi", scheduler("raw-a")), false},
		{"profile's own class label: another team refused", teamA, pod("app", "m", "x", "1", "1Gi", label("team", "b"), scheduler("raw-a")), false},
		{"default reading does not know the team label", teamA, pod("app", "m", "x", "1", "1Gi", label("team", "b"), scheduler("unread")), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := fit.Fits(ctx, tc.mover, n, []*corev1.Pod{tc.resident})
			if ok != tc.want {
				t.Fatalf("fits = %v (%s), want %v", ok, why, tc.want)
			}
		})
	}
	// The base Fitter is untouched by WithProfiles: raw-b's pod meets the defaults there.
	if ok, _ := base.Fits(ctx, pod("app", "m", "x", "1", "1Gi", label("berth.dev/instance-class", "b"), scheduler("raw-b")), n, []*corev1.Pod{classA}); ok {
		t.Fatal("the base Fitter took the profile map of a copy")
	}
}

// TestReadProfiles: every SecondaryScheduler's rendered ConfigMap is read; one without its
// ConfigMap is named and left to the defaults.
func TestReadProfiles(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := berthv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	strict := secondary("a", "berth-scheduler", &berthv1alpha1.PluginSet{InstanceIsolation: &berthv1alpha1.InstanceIsolationPlugin{
		Args: configv1.InstanceIsolationArgs{Strict: ptr.To(true)}}})
	missing := secondary("b", "other-scheduler", &berthv1alpha1.PluginSet{})
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(strict, rendered(t, strict), missing).Build()
	got, problems, err := readProfiles(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if s := isolationString(got); s != "berth-scheduler=true/ipp-class,berth.dev/instance-class" {
		t.Fatalf("profiles %s", s)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "berth-system/b") {
		t.Fatalf("problems %q, want one naming berth-system/b", problems)
	}
}

// TestFitterIsolationReasons: the refusal names InstanceIsolation and says what the plugin's
// Filter (or, for conflicting labels, its PreFilter) says; the Fitter's grants make a shared
// class one class across the namespaces it lists.
func TestFitterIsolationReasons(t *testing.T) {
	ctx := context.Background()
	fit, err := NewFitter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := node("n", "10", "100Gi")
	resident := pod("app", "resident", "n", "1", "1Gi", label("ipp-class", "a"))
	labels := func(kv map[string]string) podOpt { return func(p *corev1.Pod) { p.Labels = kv } }
	for _, tc := range []struct {
		name   string
		grant  []string // namespaces sharing class a
		mover  *corev1.Pod
		reason string // "" fits
	}{
		{name: "same namespace, same class", mover: pod("app", "m", "x", "1", "1Gi", label("ipp-class", "a"))},
		{name: "another class", mover: pod("app", "m", "x", "1", "1Gi", label("ipp-class", "b")),
			reason: "InstanceIsolation: node holds instance class app/a"},
		{name: "another namespace's class of the same value", mover: pod("other", "m", "x", "1", "1Gi", label("ipp-class", "a")),
			reason: "InstanceIsolation: node holds instance class app/a"},
		{name: "conflicting class labels", mover: pod("app", "m", "x", "1", "1Gi", labels(map[string]string{"ipp-class": "a", "berth.dev/instance-class": "b"})),
			reason: "InstanceIsolation: pod carries conflicting instance classes: ipp-class=a, berth.dev/instance-class=b"},
		{name: "class shared by an InstanceClass", grant: []string{"app", "other"}, mover: pod("other", "m", "x", "1", "1Gi", label("ipp-class", "a"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fit.Grants().Set("a", tc.grant)
			defer fit.Grants().Set("a", nil)
			ok, why := fit.Fits(ctx, tc.mover, n, []*corev1.Pod{resident})
			if ok != (tc.reason == "") || why != tc.reason {
				t.Fatalf("fits = %v (%q), want reason %q", ok, why, tc.reason)
			}
		})
	}
}
