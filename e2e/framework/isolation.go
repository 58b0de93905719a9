package framework

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

// ClassLabel is IPP's pod label carrying the instance class.
const ClassLabel = "ipp-class"

// IPPAntiAffinity is the required pod anti-affinity the IPP webhook writes for class, made
// cluster-wide (namespaceSelector {}), which is what isolation across namespaces needs.
func IPPAntiAffinity(class string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: ClassLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{class},
			}}},
			NamespaceSelector: &metav1.LabelSelector{},
			TopologyKey:       corev1.LabelHostname,
		}},
	}}
}

// InstanceIsolationProfiles are the profile entries (YAML list items under `profiles:`) that a
// SecondaryScheduler with spec.plugins.instanceIsolation renders, produced by the operator's
// own schedconfig.Render: the main profile named schedulerName and, when isolatedName is set,
// the isolated one (InterPodAffinity disabled).
func InstanceIsolationProfiles(schedulerName, isolatedName string, weight int32, args berthv1alpha1.InstanceIsolationArgs) (string, error) {
	ss := &berthv1alpha1.SecondaryScheduler{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e", Namespace: "kube-system"},
		Spec: berthv1alpha1.SecondarySchedulerSpec{
			SchedulerName: schedulerName, Image: "unused",
			Plugins: &berthv1alpha1.PluginSet{InstanceIsolation: &berthv1alpha1.InstanceIsolationPlugin{
				Weight: berthv1alpha1.Weight{Weight: &weight}, IsolatedProfileName: isolatedName, Args: args,
			}},
		},
	}
	r, err := schedconfig.Render(ss, nil)
	if err != nil {
		return "", fmt.Errorf("rendering InstanceIsolation profiles: %w", err)
	}
	var doc struct {
		Profiles []map[string]any `json:"profiles"`
	}
	if err := yaml.Unmarshal(r.YAML, &doc); err != nil {
		return "", err
	}
	out, err := yaml.Marshal(doc.Profiles)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// RenameProfile returns profile entries with the single profile's schedulerName replaced
// (benchmarks run every configuration under one name). entries must hold one profile.
func RenameProfile(entries, pick, name string) (string, error) {
	var profs []map[string]any
	if err := yaml.Unmarshal([]byte(entries), &profs); err != nil {
		return "", err
	}
	for _, p := range profs {
		if p["schedulerName"] == pick {
			p["schedulerName"] = name
			out, err := yaml.Marshal([]map[string]any{p})
			return string(out), err
		}
	}
	return "", fmt.Errorf("no profile %q in the rendered entries", pick)
}
