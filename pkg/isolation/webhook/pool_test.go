package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	unclassedRule = "; only pods of an instance class (label ipp-class or berth.dev/instance-class) or in an exempt namespace (kube-system) " +
		"may tolerate the pool taint or select the pool's nodes, which belong to instance classes"
	daemonSetRule = "; only pods in an exempt namespace (kube-system) may be DaemonSet pods of an instance class, since a DaemonSet puts a pod on every node it selects, " +
		"beside whatever class runs there: run the class's workload as a Deployment or StatefulSet, or remove the class label from the DaemonSet's pod template"
	poolTolMsg = ": tolerates the isolation pool taint ipp=true:NoSchedule"
	poolSelMsg = ": selects the isolation pool's nodes ipp=true"
	termsPath  = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
)

func tolerating(tols ...corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = tols }
}

func requiring(terms ...[]corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		var ts []corev1.NodeSelectorTerm
		for _, exprs := range terms {
			ts = append(ts, corev1.NodeSelectorTerm{MatchExpressions: exprs})
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts}}}
	}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) []corev1.NodeSelectorRequirement {
	return []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}
}

func all(mods ...func(*corev1.Pod)) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, m := range mods {
			m(p)
		}
	}
}

// TestMutatePoolAccess: outside the exempt namespaces the pool is the classes' alone. A pod
// without a class that tolerates the pool taint or selects its nodes is refused, and so is a
// DaemonSet pod with a class (issue 20 item 5: a tenant with the built-in edit role made a
// DaemonSet labelled ipp-class: red, tolerating the taint and selecting ipp=true, and got a
// pod on every pool node beside other classes). Each refusal names the field and the rule, the
// same in every mode; what does not reach the pool is let through.
func TestMutatePoolAccess(t *testing.T) {
	poolTol := corev1.Toleration{Key: "ipp", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	dsRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "attack", UID: "d5", Controller: ptrTo(true)}
	red := map[string]string{"ipp-class": "red"}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		mod    func(*corev1.Pod)
		cfg    func(*Config)
		// want is the whole refusal; "" means admitted.
		want string
	}{
		// Unclassed pods reaching for the pool.
		{name: "the pool toleration", mod: tolerating(poolTol), want: "spec.tolerations[0]" + poolTolMsg + unclassedRule},
		{name: "operator and effect left empty", mod: tolerating(corev1.Toleration{Key: "ipp", Value: "true"}), want: "spec.tolerations[0]" + poolTolMsg + unclassedRule},
		{name: "the pool key, any value", mod: tolerating(userTol, corev1.Toleration{Key: "ipp", Operator: corev1.TolerationOpExists}), want: "spec.tolerations[1]" + poolTolMsg + unclassedRule},
		{name: "every taint tolerated", mod: tolerating(userTol, corev1.Toleration{Operator: corev1.TolerationOpExists}), want: "spec.tolerations[1]" + poolTolMsg + unclassedRule},
		{name: "every NoSchedule taint tolerated", mod: tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}), want: "spec.tolerations[0]" + poolTolMsg + unclassedRule},
		{name: "numeric comparison on the pool key", mod: tolerating(corev1.Toleration{Key: "ipp", Operator: corev1.TolerationOpGt, Value: "0"}), want: "spec.tolerations[0]" + poolTolMsg + unclassedRule},
		{name: "nodeSelector", mod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd", "ipp": "true"} }, want: "spec.nodeSelector[ipp]" + poolSelMsg + unclassedRule},
		{name: "node affinity In, second term", mod: requiring(req("zone", corev1.NodeSelectorOpIn, "z1"), req("ipp", corev1.NodeSelectorOpIn, "false", "true")),
			want: termsPath + "[1].matchExpressions[0]" + poolSelMsg + unclassedRule},
		{name: "node affinity Exists", mod: requiring(append(req("zone", corev1.NodeSelectorOpIn, "z1"), req("ipp", corev1.NodeSelectorOpExists)...)),
			want: termsPath + "[0].matchExpressions[1]" + poolSelMsg + unclassedRule},
		{name: "node affinity NotIn another value", mod: requiring(req("ipp", corev1.NodeSelectorOpNotIn, "false")), want: termsPath + "[0].matchExpressions[0]" + poolSelMsg + unclassedRule},
		{name: "toleration and selection: both named", mod: all(tolerating(poolTol), func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"ipp": "true"} }),
			want: "spec.tolerations[0]" + poolTolMsg + "; spec.nodeSelector[ipp]" + poolSelMsg + unclassedRule},
		{name: "unclassed DaemonSet tolerating the pool", mod: all(tolerating(poolTol), func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{dsRef} }),
			want: "spec.tolerations[0]" + poolTolMsg + unclassedRule},
		{name: "empty class value is no class", labels: map[string]string{"ipp-class": ""}, mod: tolerating(poolTol), want: "spec.tolerations[0]" + poolTolMsg + unclassedRule},
		{name: "the chart's pool and namespaces", cfg: func(c *Config) {
			c.PoolLabel, c.TaintKey, c.TaintEffect = "node-restriction.kubernetes.io/instance-pool", "berth.dev/instance-pool", corev1.TaintEffectNoExecute
			c.ExemptNamespaces = []string{"berth-system", "kube-system"}
		}, mod: all(tolerating(corev1.Toleration{Key: "berth.dev/instance-pool", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}),
			func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"node-restriction.kubernetes.io/instance-pool": "true"}
			}),
			want: "spec.tolerations[0]: tolerates the isolation pool taint berth.dev/instance-pool=true:NoExecute; " +
				"spec.nodeSelector[node-restriction.kubernetes.io/instance-pool]: selects the isolation pool's nodes node-restriction.kubernetes.io/instance-pool=true; " +
				"only pods of an instance class (label ipp-class or berth.dev/instance-class) or in an exempt namespace (berth-system, kube-system) " +
				"may tolerate the pool taint or select the pool's nodes, which belong to instance classes"},

		// Unclassed pods that stay off the pool.
		{name: "another value of the pool key", mod: tolerating(corev1.Toleration{Key: "ipp", Value: "false", Effect: corev1.TaintEffectNoSchedule})},
		{name: "another effect of the pool key", mod: tolerating(corev1.Toleration{Key: "ipp", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})},
		{name: "nodeSelector on another pool value", mod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"ipp": "false"} }},
		{name: "node affinity away from the pool", mod: requiring(append(req("ipp", corev1.NodeSelectorOpNotIn, "true"), req("zone", corev1.NodeSelectorOpIn, "z1")...),
			req("ipp", corev1.NodeSelectorOpDoesNotExist), req("ipp", corev1.NodeSelectorOpIn, "false"))},
		{name: "preferred node affinity only", mod: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: req("ipp", corev1.NodeSelectorOpIn, "true")}}}}}
		}},
		{name: "in an exempt namespace", mod: all(tolerating(poolTol), func(p *corev1.Pod) {
			p.Namespace = "monitoring"
			p.Spec.NodeSelector = map[string]string{"ipp": "true"}
		}), cfg: func(c *Config) { c.ExemptNamespaces = []string{"kube-system", "monitoring"} }},

		// Classed DaemonSet pods.
		{name: "the incident: classed DaemonSet on the pool", labels: red, mod: all(tolerating(poolTol), func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"ipp": "true"}
			p.OwnerReferences = []metav1.OwnerReference{dsRef}
		}), want: "metadata.ownerReferences[0]: pod of instance class red is owned by DaemonSet attack" + daemonSetRule},
		{name: "classed DaemonSet pod anywhere", labels: map[string]string{"berth.dev/instance-class": "blue"}, mod: func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{dsRef} },
			want: "metadata.ownerReferences[0]: pod of instance class blue is owned by DaemonSet attack" + daemonSetRule},
		// why: an owner reference is whatever the creator wrote; claiming a DaemonSet owner used
		// to skip isolation altogether.
		{name: "a DaemonSet owner written by hand, second reference", labels: red, mod: func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{rsRef, {APIVersion: "example.com/v1", Kind: "DaemonSet", Name: "fake", UID: "f"}}
		}, want: "metadata.ownerReferences[1]: pod of instance class red is owned by DaemonSet fake" + daemonSetRule},
		{name: "classed DaemonSet pod in an exempt namespace", labels: red, mod: func(p *corev1.Pod) {
			p.Namespace = "kube-system"
			p.OwnerReferences = []metav1.OwnerReference{dsRef}
		}},
	} {
		for _, mode := range []Mode{ModeIPP, ModeBerth, ModeBoth} {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				c := cfg(mode)
				if tc.cfg != nil {
					tc.cfg(&c)
				}
				if errs := c.Validate(); len(errs) > 0 {
					t.Fatalf("test config: %v", errs)
				}
				p := pod(tc.labels, tc.mod)
				res, err := c.Mutate(p)
				if tc.want == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					// why: admitted unclassed pods must not be touched either.
					if _, class, _ := ClassOf(p.Labels, c.ClassLabels); class == "" && len(res.Patch) != 0 {
						t.Fatalf("unclassed pod patched: %+v", res.Patch)
					}
					return
				}
				var r *Refusal
				if err == nil || !asRefusal(err, &r) {
					t.Fatalf("admitted (%+v) or not a Refusal (%v), want %q", res, err, tc.want)
				}
				if r.Message != tc.want {
					t.Fatalf("refusal\n got %q\nwant %q", r.Message, tc.want)
				}
				if len(res.Patch) != 0 {
					t.Fatalf("a refusal carries a patch: %+v", res.Patch)
				}
			})
		}
	}
}
