package placement

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

// RunConfig is one scheduler configuration under test.
type RunConfig struct {
	Key  string
	Name string
	// Plugins is the SecondaryScheduler spec.plugins block, as the chart renders it from
	// values.yaml, with %[1]s for the shared load-aware arguments; empty = the stock
	// kube-scheduler of the cluster (schedulerName default-scheduler).
	Plugins string
	// WaitPlugin is the plugin whose first successful watcher fetch the run waits for.
	WaitPlugin string
}

// Stock reports whether the run uses the cluster's stock kube-scheduler.
func (r RunConfig) Stock() bool { return r.Plugins == "" }

// The chart's NodeImageLocality default rides along in every berth run, so the profile is the
// one the chart ships (it scores 0 everywhere here: KWOK nodes hold no images).
const imageLocality = `
nodeImageLocality:
  weight: 5
  args: {useNodeStatus: true, tieBreakSmallImages: true}`

func tlp(target, weight int) string {
	return fmt.Sprintf(`
targetLoadPacking:
  weight: %d
  args:
    %%[1]s
    targetUtilization: %d
    defaultRequests: {cpu: "1"}
    defaultRequestsMultiplier: "1.5"`, weight, target)
}

func lvrb(weight int) string {
	return fmt.Sprintf(`
loadVariationRiskBalancing:
  weight: %d
  args:
    %%[1]s
    safeVarianceMargin: "1"
    safeVarianceSensitivity: "1"`, weight)
}

const noDefaultScore = "\ndisableDefaultScore: true"

// catalog is every configuration the benchmark knows; DefaultRuns are the ones the issue
// compares, the rest are the tuning variants (chart defaults, weights, disableDefaultScore).
var catalog = []RunConfig{
	{Key: "default", Name: "default scheduler"},
	{Key: "tlp40", Name: "TLP 40", Plugins: tlp(40, 1) + imageLocality, WaitPlugin: "TargetLoadPacking"},
	{Key: "tlp60", Name: "TLP 60", Plugins: tlp(60, 1) + imageLocality, WaitPlugin: "TargetLoadPacking"},
	{Key: "lvrb", Name: "LVRB", Plugins: lvrb(1) + imageLocality, WaitPlugin: "LoadVariationRiskBalancing"},
	{Key: "both-filter", Name: "TLP 40+LVRB+filter", Plugins: tlp(40, 1) + lvrb(1) + imageLocality + usageFilter, WaitPlugin: "TargetLoadPacking"},
	{Key: "chart", Name: "chart (TLP 40+LVRB)", Plugins: tlp(40, 1) + lvrb(1) + imageLocality, WaitPlugin: "TargetLoadPacking"},
	{Key: "tlp40-nds", Name: "TLP 40 noDefScore", Plugins: tlp(40, 1) + imageLocality + noDefaultScore, WaitPlugin: "TargetLoadPacking"},
	{Key: "tlp60-nds", Name: "TLP 60 noDefScore", Plugins: tlp(60, 1) + imageLocality + noDefaultScore, WaitPlugin: "TargetLoadPacking"},
	{Key: "tlp40-w5", Name: "TLP 40 weight 5", Plugins: tlp(40, 5) + imageLocality, WaitPlugin: "TargetLoadPacking"},
	{Key: "both-filter-nds", Name: "TLP 40+LVRB+filter noDefScore", Plugins: tlp(40, 1) + lvrb(1) + imageLocality + usageFilter + noDefaultScore, WaitPlugin: "TargetLoadPacking"},
}

// usageFilter is applied through the shared arguments (see render): the usage-threshold
// Filter keeps pods off nodes whose measured CPU plus unreported placements is above 80 %, a
// margin under the 90 % the benchmark counts as hot, for bursty pods.
const usageFilter = "\n#usage-filter"

// DefaultRuns are the comparison: default scheduler, TargetLoadPacking at 40 and
// 60 %, LoadVariationRiskBalancing, and both with the usage-threshold Filter.
var DefaultRuns = []string{"default", "tlp40", "tlp60", "lvrb", "both-filter"}

// Runs resolves keys against the catalog.
func Runs(keys []string) ([]RunConfig, error) {
	var out []RunConfig
	for _, k := range keys {
		k = strings.TrimSpace(k)
		found := false
		for _, r := range catalog {
			if r.Key == k {
				out, found = append(out, r), true
			}
		}
		if !found {
			var known []string
			for _, r := range catalog {
				known = append(known, r.Key)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("unknown run %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no run selected")
	}
	return out, nil
}

// Timing are the knobs of the compressed timeline that go into the load-aware arguments.
type Timing struct {
	RefreshSeconds int
}

// SchedulerName is the profile the berth runs' pods name.
const SchedulerName = "berth-scheduler"

// render turns a run's plugins into the KubeSchedulerConfiguration the operator would
// deploy for it (schedconfig.Render, the operator's own renderer and validator), with leader
// election off so it runs beside the cluster's default scheduler.
func (r RunConfig) render(watcherURL string, t Timing) (string, error) {
	plugins := r.Plugins
	thresholds := ""
	if strings.Contains(plugins, usageFilter) {
		plugins = strings.ReplaceAll(plugins, usageFilter, "")
		thresholds = "\n    usageThresholds: {cpu: 80, memory: 90}"
	}
	common := fmt.Sprintf("watcherAddress: %s\n    refreshIntervalSeconds: %d\n    watcherTimeoutSeconds: 2%s",
		watcherURL, t.RefreshSeconds, thresholds)
	spec := "apiVersion: berth.dev/v1alpha1\nkind: SecondaryScheduler\nmetadata: {name: placement, namespace: kube-system}\n" +
		"spec:\n  schedulerName: " + SchedulerName + "\n  image: unused\n  plugins:" + indent(fmt.Sprintf(plugins, common), "    ") + "\n"
	var ss berthv1alpha1.SecondaryScheduler
	if err := yaml.UnmarshalStrict([]byte(spec), &ss); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", r.Name, err, spec)
	}
	out, err := schedconfig.Render(&ss, nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", r.Name, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(out.YAML, &doc); err != nil {
		return "", err
	}
	doc["leaderElection"] = map[string]any{"leaderElect": false}
	b, err := yaml.Marshal(doc)
	return string(b), err
}

func indent(s, pre string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pre + l
		}
	}
	return strings.Join(lines, "\n")
}
