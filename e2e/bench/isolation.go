package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// Profile names of the instance-isolation comparison (isolationbench).
const (
	IsolationAntiAffinity = "kube-scheduler (stock) + IPP anti-affinity"
	IsolationBerthMode    = "berth-scheduler + InstanceIsolation (berth mode)"
	IsolationBothMode     = "berth-scheduler isolated profile (both mode)"
	IsolationNoClass      = "berth-scheduler, no class"
	// IsolationNoClassRecorded is the berth-mode profile without InstanceIsolation: what the
	// operator renders with no plugin but DecisionRecord (on by default in every rendered
	// profile), so berth mode against it is what isolation itself costs.
	IsolationNoClassRecorded = "berth-scheduler, no class, decision record"
)

// isolationGoal is the least berth mode may reach of the no-class profile, in pods/s and in
// CPU per pod (issue 25): isolation costs a Filter lookup per node and little else.
const isolationGoal = 0.95

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
	recorded, err := recordingOnlyProfile()
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
		{Name: IsolationBerthMode, Binary: cluster.BerthScheduler, Profiles: main, PodMutator: label, Setup: isolationReads},
		{Name: IsolationBothMode, Binary: cluster.BerthScheduler, Profiles: isolated, PodMutator: labelAndTerm, Setup: isolationReads},
		{Name: IsolationNoClass, Binary: cluster.BerthScheduler, Profiles: "- schedulerName: " + SchedulerName + "\n", PodMutator: groupOnly},
		{Name: IsolationNoClassRecorded, Binary: cluster.BerthScheduler, Profiles: recorded, PodMutator: groupOnly},
	}, nil
}

// isolationReads lets InstanceIsolation list the InstanceClasses, as installed.
func isolationReads(ctx context.Context, c *cluster.Cluster) error {
	return grantPluginReads(ctx, c, "bench-isolation")
}

// recordingOnlyProfile is the profile entry the operator renders for a SecondaryScheduler
// with decision recording and no other plugin, named SchedulerName.
func recordingOnlyProfile() (string, error) {
	ss := &berthv1alpha1.SecondaryScheduler{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "kube-system"},
		Spec: berthv1alpha1.SecondarySchedulerSpec{SchedulerName: SchedulerName, Image: "unused",
			Plugins: &berthv1alpha1.PluginSet{DecisionRecord: &berthv1alpha1.DecisionRecordPlugin{}}},
	}
	out, err := framework.RenderedProfiles(ss)
	if err != nil {
		return "", fmt.Errorf("rendering the decision-record-only profile: %w", err)
	}
	return out, nil
}

// PrintIsolationRatios writes berth and both mode against the anti-affinity figure and the
// no-class figures: medians of pods/s, and CPU per pod paired by round (each run's against the
// same round's no-class run), then the goal.
func (r *Result) PrintIsolationRatios(w io.Writer) {
	med := map[string]float64{}
	names := map[string]string{} // without the ", all nodes" suffix → as run
	for _, s := range r.Summaries() {
		short := strings.TrimSuffix(s.Profile, ", all nodes")
		med[short], names[short] = s.Median, s.Profile
	}
	ratio := func(a, b string) (float64, bool) {
		if med[b] == 0 || med[a] == 0 {
			return 0, false
		}
		return med[a] / med[b], true
	}
	// CPU per pod as a speed: no class's CPU ÷ this profile's, so above 1 is cheaper, as for pods/s.
	cpu := func(a, b string) (float64, bool) {
		v, ok := r.PairedCPURatio(names[b], names[a])
		return v, ok && v > 0
	}
	show := func(v float64, ok bool) string {
		if !ok {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", v)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile\tmedian pods/s\tvs anti-affinity\tvs no class\tCPU vs no class (paired)\tvs no class, decision record\tCPU (paired)\t")
	for _, p := range []string{IsolationBerthMode, IsolationBothMode} {
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t\n", p, med[p], show(ratio(p, IsolationAntiAffinity)),
			show(ratio(p, IsolationNoClass)), show(cpu(p, IsolationNoClass)),
			show(ratio(p, IsolationNoClassRecorded)), show(cpu(p, IsolationNoClassRecorded)))
	}
	tw.Flush()
	pods, podsOK := ratio(IsolationBerthMode, IsolationNoClass)
	c, cpuOK := cpu(IsolationBerthMode, IsolationNoClass)
	fmt.Fprintln(w, isolationGoalLine(pods, podsOK, c, cpuOK))
}

// isolationGoalLine says whether berth mode reached isolationGoal of the no-class profile in
// pods/s and in CPU per pod (as a speed: above 1 is cheaper).
func isolationGoalLine(pods float64, podsOK bool, cpu float64, cpuOK bool) string {
	show := func(v float64, ok bool) string {
		if !ok {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", v)
	}
	verdict := "met"
	switch {
	case !podsOK || !cpuOK:
		verdict = "not measured"
	case pods < isolationGoal || cpu < isolationGoal:
		verdict = "NOT met"
	}
	return fmt.Sprintf("goal: berth mode ≥ %.2f× no class in pods/s (%s) and in CPU per pod (%s): %s",
		isolationGoal, show(pods, podsOK), show(cpu, cpuOK), verdict)
}
