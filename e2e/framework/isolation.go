package framework

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	configv1 "github.com/berth-sched/berth/api/config/v1"
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
func InstanceIsolationProfiles(schedulerName, isolatedName string, weight int32, args configv1.InstanceIsolationArgs) (string, error) {
	ss := &berthv1alpha1.SecondaryScheduler{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e", Namespace: "kube-system"},
		Spec: berthv1alpha1.SecondarySchedulerSpec{
			SchedulerName: schedulerName, Image: "unused",
			Plugins: &berthv1alpha1.PluginSet{InstanceIsolation: &berthv1alpha1.InstanceIsolationPlugin{
				Weight: berthv1alpha1.Weight{Weight: &weight}, IsolatedProfileName: isolatedName, Args: args,
			}},
		},
	}
	out, err := RenderedProfiles(ss)
	if err != nil {
		return "", fmt.Errorf("rendering InstanceIsolation profiles: %w", err)
	}
	return out, nil
}

// RenderedProfiles are the profile entries (YAML list items under `profiles:`) the operator
// renders for ss.
func RenderedProfiles(ss *berthv1alpha1.SecondaryScheduler) (string, error) {
	r, err := schedconfig.Render(ss, nil)
	if err != nil {
		return "", err
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

// ChartIsolationArgs returns the --isolation-* arguments of the operator Deployment named
// deployment in the chart's rendered objs, each flag in set given its value there instead (the
// suites move the webhook to loopback and shorten its lifetimes).
func ChartIsolationArgs(objs []*unstructured.Unstructured, deployment string, set map[string]string) ([]string, error) {
	var args []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != deployment {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(cs) == 0 {
			return nil, fmt.Errorf("deployment %s has no containers", deployment)
		}
		raw, _ := cs[0].(map[string]any)["args"].([]any)
		for _, a := range raw {
			s, _ := a.(string)
			if !strings.HasPrefix(s, "--isolation") {
				continue
			}
			if v, ok := set[strings.SplitN(s, "=", 2)[0]]; ok {
				s = strings.SplitN(s, "=", 2)[0] + "=" + v
			}
			args = append(args, s)
		}
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("the chart rendered no --isolation-* arguments for deployment %s", deployment)
	}
	return args, nil
}

// InstallChartWebhook creates the chart's isolation webhook Secret and
// MutatingWebhookConfiguration from its rendered objs, the configuration pointed at url. Why a
// URL: the API server of a simulated-node cluster runs outside any pod network, and the webhook
// listens on loopback. The returned func deletes what was created.
func InstallChartWebhook(ctx context.Context, cs kubernetes.Interface, objs []*unstructured.Unstructured, url string) (func(), error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	bg := context.Background()
	for _, o := range objs {
		var err error
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			var m admissionregistrationv1.MutatingWebhookConfiguration
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &m); err != nil {
				break
			}
			for i := range m.Webhooks {
				m.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
			}
			if _, err = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &m, metav1.CreateOptions{}); err == nil {
				undo = append(undo, func() {
					_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(bg, m.Name, metav1.DeleteOptions{})
				})
			}
		case "Secret":
			var s corev1.Secret
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s); err != nil {
				break
			}
			if _, err = cs.CoreV1().Secrets(s.Namespace).Create(ctx, &s, metav1.CreateOptions{}); err == nil {
				undo = append(undo, func() { _ = cs.CoreV1().Secrets(s.Namespace).Delete(bg, s.Name, metav1.DeleteOptions{}) })
			}
		default:
			continue
		}
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return cleanup, nil
}
