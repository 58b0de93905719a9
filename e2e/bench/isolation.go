package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// Profile names of the instance-isolation comparison (isolationbench).
const (
	IsolationAntiAffinity = "kube-scheduler (stock) + IPP anti-affinity"
	IsolationBerthMode    = "berth-scheduler + InstanceIsolation (berth mode)"
	IsolationBothMode     = "berth-scheduler isolated profile (both mode)"
	IsolationNoClass      = "berth-scheduler, no class"
)

// isolationWeight is InstanceIsolation's score weight in the measured profiles (the chart's).
const isolationWeight = 10

func podIndex(p *corev1.Pod) int {
	i, err := strconv.Atoi(strings.TrimPrefix(p.Name, "pod-"))
	if err != nil {
		panic(fmt.Sprintf("bench pod name %q has no index", p.Name))
	}
	return i
}

// IsolationProfiles are the four configurations compared on the same pods: pod i has class
// i mod classes. The stock scheduler enforces the classes with IPP's anti-affinity term made
// cluster-wide; berth mode gives pods the label only; both mode gives them the label and the
// term and runs the isolated profile (InterPodAffinity off); the last has no class at all
// (the same values under a plain "group" label) on berth-scheduler's default plugins.
func IsolationProfiles(classes int) ([]Profile, error) {
	entries, err := framework.InstanceIsolationProfiles(SchedulerName, SchedulerName+"-isolated", isolationWeight, configv1.InstanceIsolationArgs{})
	if err != nil {
		return nil, err
	}
	main, err := framework.RenameProfile(entries, SchedulerName, SchedulerName)
	if err != nil {
		return nil, err
	}
	isolated, err := framework.RenameProfile(entries, SchedulerName+"-isolated", SchedulerName)
	if err != nil {
		return nil, err
	}
	class := func(p *corev1.Pod) string { return fmt.Sprintf("class-%02d", podIndex(p)%classes) }
	label := func(p *corev1.Pod) {
		p.Labels[framework.ClassLabel] = class(p)
	}
	// why: the same label values under a key that is not a class label. Pods whose labels
	// differ get different scheduling signatures; identical pods would be batched by the
	// scheduler (OpportunisticBatching: one Filter call on a hinted node instead of hundreds),
	// which measures batching, not isolation.
	groupOnly := func(p *corev1.Pod) {
		p.Labels["group"] = class(p)
	}
	labelAndTerm := func(p *corev1.Pod) {
		label(p)
		p.Spec.Affinity = framework.IPPAntiAffinity(class(p))
	}
	return []Profile{
		{Name: IsolationAntiAffinity, Binary: cluster.DefaultScheduler, Profiles: "- schedulerName: " + SchedulerName + "\n", PodMutator: labelAndTerm},
		{Name: IsolationBerthMode, Binary: cluster.BerthScheduler, Profiles: main, PodMutator: label},
		{Name: IsolationBothMode, Binary: cluster.BerthScheduler, Profiles: isolated, PodMutator: labelAndTerm},
		{Name: IsolationNoClass, Binary: cluster.BerthScheduler, Profiles: "- schedulerName: " + SchedulerName + "\n", PodMutator: groupOnly},
	}, nil
}

// PrintIsolationRatios writes berth and both mode against the anti-affinity figure and the
// no-class figure (medians).
func (r *Result) PrintIsolationRatios(w io.Writer) {
	med := map[string]float64{}
	for _, s := range r.Summaries() {
		med[strings.TrimSuffix(s.Profile, ", all nodes")] = s.Median
	}
	ratio := func(a, b string) string {
		if med[b] == 0 || med[a] == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", med[a]/med[b])
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile\tmedian pods/s\tvs anti-affinity\tvs no class\t")
	for _, p := range []string{IsolationBerthMode, IsolationBothMode} {
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\t\n", p, med[p], ratio(p, IsolationAntiAffinity), ratio(p, IsolationNoClass))
	}
	tw.Flush()
	fmt.Fprintf(w, "goal: berth mode ≥ 10× anti-affinity (%s) and ≥ 0.9× no class (%s)\n",
		ratio(IsolationBerthMode, IsolationAntiAffinity), ratio(IsolationBerthMode, IsolationNoClass))
}
