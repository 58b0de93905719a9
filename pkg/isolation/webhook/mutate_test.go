package webhook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/instanceisolation"
)

// why: the webhook and the plugin must read the same labels out of the box, or a pod the
// webhook routes to Berth would be unclassed for the Filter.
func TestDefaultClassLabelsMatchPlugin(t *testing.T) {
	if !reflect.DeepEqual(DefaultClassLabels, instanceisolation.DefaultClassLabels) {
		t.Fatalf("webhook %v, plugin %v", DefaultClassLabels, instanceisolation.DefaultClassLabels)
	}
	if MirrorPodAnnotation != instanceisolation.MirrorPodAnnotation {
		t.Fatalf("mirror annotation differs")
	}
}

func cfg(mode Mode) Config {
	c := Defaults()
	c.Mode = mode
	c.IsolatedSchedulerName = "berth-scheduler-isolated"
	return c
}

func pod(labels map[string]string, mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: labels},
		Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName,
			Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
	if mod != nil {
		mod(p)
	}
	return p
}

var (
	classA    = map[string]string{"ipp-class": "a", "app": "x"}
	userTol   = corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	userTerms = []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}},
		{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n7"}}}},
	}
	userAnti = corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, TopologyKey: "topology.kubernetes.io/zone"}
	userPref = corev1.WeightedPodAffinityTerm{Weight: 5, PodAffinityTerm: corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}, TopologyKey: corev1.LabelHostname}}
	rsRef  = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: types.UID("0c7a1b52-6a39-4c59-9d8a-2b6b1c9d7e11"), Controller: ptrTo(true)}
	ssRef  = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: types.UID("5d1c7e0e-8f4b-4c3c-8a51-3c0f3f2c6b22"), Controller: ptrTo(true)}
	jobRef = metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: types.UID("9e2b1f8a-0d6c-4f6e-b1f4-7f6a5c3d2e33"), Controller: ptrTo(true)}
)

func ptrTo[T any](v T) *T { return &v }

func withUserSpec(p *corev1.Pod) {
	p.Spec.Tolerations = []corev1.Toleration{userTol}
	p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	p.Spec.Affinity = &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: userTerms},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 3,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "fast", Operator: corev1.NodeSelectorOpExists}}}}},
		},
		PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{userAnti},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{userPref},
		},
	}
}

// apply runs the webhook on p under c, applies its patch the way the API server does and
// returns the patched pod.
func apply(t *testing.T, c Config, p *corev1.Pod) (*corev1.Pod, Result) {
	t.Helper()
	res, err := c.Mutate(p)
	if err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	orig, _ := json.Marshal(p)
	if len(res.Patch) == 0 {
		return p.DeepCopy(), res
	}
	pj, _ := json.Marshal(res.Patch)
	patch, err := jsonpatch.DecodePatch(pj)
	if err != nil {
		t.Fatalf("decoding the patch: %v\n%s", err, pj)
	}
	out, err := patch.Apply(orig)
	if err != nil {
		t.Fatalf("applying the patch: %v\n%s", err, pj)
	}
	got := &corev1.Pod{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	for _, op := range res.Patch {
		if op.Op != "add" {
			t.Errorf("patch op %s %s: the webhook only adds", op.Op, op.Path)
		}
	}
	// Nothing of the user's spec is lost: the original JSON is a sub-document of the result
	// (lists keep their elements at their indexes), schedulerName aside.
	var a, b any
	before := p.DeepCopy()
	before.Spec.SchedulerName = ""
	ob, _ := json.Marshal(before)
	_ = json.Unmarshal(ob, &a)
	_ = json.Unmarshal(out, &b)
	if path, ok := subset(a, b, ""); !ok {
		t.Errorf("the user's spec at %s is not kept in the patched pod\npatch: %s", path, pj)
	}
	return got, res
}

// subset: every value of a is in b at the same place (maps by key, lists by index).
func subset(a, b any, path string) (string, bool) {
	switch av := a.(type) {
	case nil:
		// why: JSON null is an absent value (e.g. nodeSelectorTerms: null); filling it loses nothing.
		return "", true
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range av {
			if p, ok := subset(v, bv[k], path+"/"+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(bv) < len(av) {
			return path, false
		}
		for i := range av {
			if p, ok := subset(av[i], bv[i], fmt.Sprintf("%s/%d", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	default:
		return path, reflect.DeepEqual(a, b)
	}
}

func poolTol(c Config) corev1.Toleration {
	return corev1.Toleration{Key: c.TaintKey, Operator: corev1.TolerationOpEqual, Value: c.TaintValue, Effect: c.TaintEffect}
}

func hasTerm(terms []corev1.PodAffinityTerm, want corev1.PodAffinityTerm) bool {
	for _, t := range terms {
		if equalTerm(t, want) {
			return true
		}
	}
	return false
}

func antiTerms(p *corev1.Pod) []corev1.PodAffinityTerm {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
		return nil
	}
	return p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
}

// TestMutateEveryMode: for each mode and pod shape, the patch applies, keeps every toleration,
// node selector term, node preference and pod (anti-)affinity term of the user, adds exactly
// the mode's constraints, and running the webhook again on the result changes nothing
// (reinvocationPolicy IfNeeded).
func TestMutateEveryMode(t *testing.T) {
	type want struct {
		scheduler string // "" : unchanged
		classTerm bool
		spreadUID string
		userKept  bool
		warning   string
	}
	cases := []struct {
		name string
		mode Mode
		pod  *corev1.Pod
		want want
	}{
		{"ipp bare", ModeIPP, pod(classA, nil), want{classTerm: true}},
		{"ipp user spec", ModeIPP, pod(classA, withUserSpec), want{classTerm: true, userKept: true}},
		{"ipp ReplicaSet replica", ModeIPP, pod(classA, func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{rsRef} }), want{classTerm: true, spreadUID: string(rsRef.UID)}},
		{"ipp StatefulSet replica, user spec", ModeIPP, pod(classA, func(p *corev1.Pod) { withUserSpec(p); p.OwnerReferences = []metav1.OwnerReference{ssRef} }), want{classTerm: true, spreadUID: string(ssRef.UID), userKept: true}},
		{"ipp Job pod without labels map", ModeIPP, pod(map[string]string{"berth.dev/instance-class": "b"}, func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{jobRef} }), want{classTerm: true, spreadUID: string(jobRef.UID)}},
		{"berth bare", ModeBerth, pod(classA, nil), want{scheduler: "berth-scheduler"}},
		{"berth empty schedulerName", ModeBerth, pod(classA, func(p *corev1.Pod) { p.Spec.SchedulerName = "" }), want{scheduler: "berth-scheduler"}},
		{"berth user spec", ModeBerth, pod(classA, withUserSpec), want{scheduler: "berth-scheduler", userKept: true}},
		{"berth replica: the plugin spreads, no term", ModeBerth, pod(classA, func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{rsRef} }), want{scheduler: "berth-scheduler"}},
		{"berth other scheduler kept", ModeBerth, pod(classA, func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano" }), want{warning: `"volcano" kept`}},
		{"both bare: isolated profile", ModeBoth, pod(classA, nil), want{scheduler: "berth-scheduler-isolated", classTerm: true}},
		{"both replica: isolated profile", ModeBoth, pod(classA, func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{rsRef} }), want{scheduler: "berth-scheduler-isolated", classTerm: true, spreadUID: string(rsRef.UID)}},
		{"both user terms: main profile", ModeBoth, pod(classA, withUserSpec), want{scheduler: "berth-scheduler", classTerm: true, userKept: true}},
		{"both only user preferred node affinity and tolerations: isolated", ModeBoth, pod(classA, func(p *corev1.Pod) {
			withUserSpec(p)
			p.Spec.Affinity.PodAntiAffinity = nil
		}), want{scheduler: "berth-scheduler-isolated", classTerm: true, userKept: true}},
		{"both user pod affinity: main profile", ModeBoth, pod(classA, func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{userPref}}}
		}), want{scheduler: "berth-scheduler", classTerm: true}},
		{"both explicit isolated with own terms: kept, warned", ModeBoth, pod(classA, func(p *corev1.Pod) { withUserSpec(p); p.Spec.SchedulerName = "berth-scheduler-isolated" }),
			want{classTerm: true, userKept: true, warning: "are ignored"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg(tc.mode)
			got, res := apply(t, c, tc.pod)
			_, class, _ := ClassOf(tc.pod.Labels, c.ClassLabels)
			if res.Class != class {
				t.Errorf("class %q, want %q", res.Class, class)
			}
			// Pool toleration and node affinity in every mode, ANDed into each user term.
			found := false
			for _, tol := range got.Spec.Tolerations {
				found = found || reflect.DeepEqual(tol, poolTol(c))
			}
			if !found {
				t.Errorf("no pool toleration in %+v", got.Spec.Tolerations)
			}
			terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			// why: with the marker on, each of the user's terms is followed (after all of them)
			// by its marker-free copy (marker_test.go checks the terms themselves).
			if n := len(terms); tc.want.userKept && tc.pod.Spec.Affinity.NodeAffinity != nil && n != 2*len(userTerms) {
				t.Errorf("%d node selector terms, want the user's %d twice", n, len(userTerms))
			}
			for i, term := range terms {
				if !hasRequirement(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: "ipp", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}) {
					t.Errorf("node selector term %d lacks the pool: %+v", i, term)
				}
			}
			// One term per class key, whichever key the pod itself uses.
			for _, key := range c.ClassLabels {
				if h := hasTerm(antiTerms(got), ClassTerm(key, class)); h != tc.want.classTerm {
					t.Errorf("class anti-affinity term on %s present %v, want %v: %+v", key, h, tc.want.classTerm, antiTerms(got))
				}
				// why: without an InstanceClass the class is the pod's namespace's alone.
				if h := hasTerm(antiTerms(got), OwnerTerm(key, class, []string{"ns"})); h != tc.want.classTerm {
					t.Errorf("owner anti-affinity term on %s present %v, want %v: %+v", key, h, tc.want.classTerm, antiTerms(got))
				}
				if tc.want.classTerm {
					for _, term := range antiTerms(got) {
						if equalTerm(term, ClassTerm(key, class)) && (term.NamespaceSelector == nil || len(term.Namespaces) > 0) {
							t.Errorf("class term is not cluster-wide: %+v", term)
						}
					}
				}
			}
			if tc.want.spreadUID != "" {
				if got.Labels[SpreadLabel] != tc.want.spreadUID || !hasTerm(antiTerms(got), SpreadTerm(tc.want.spreadUID)) {
					t.Errorf("replicas not spread: label %q terms %+v", got.Labels[SpreadLabel], antiTerms(got))
				}
			} else if _, ok := got.Labels[SpreadLabel]; ok {
				t.Errorf("spread label set without a controller to spread or in mode %s", tc.mode)
			}
			wantSched := tc.pod.Spec.SchedulerName
			if tc.want.scheduler != "" {
				wantSched = tc.want.scheduler
			}
			if got.Spec.SchedulerName != wantSched {
				t.Errorf("schedulerName %q, want %q", got.Spec.SchedulerName, wantSched)
			}
			if tc.want.userKept {
				if got.Spec.Tolerations[0] != userTol || got.Spec.NodeSelector["disk"] != "ssd" {
					t.Errorf("user tolerations/nodeSelector changed: %+v %v", got.Spec.Tolerations, got.Spec.NodeSelector)
				}
			}
			if w := strings.Join(res.Warnings, "|"); !strings.Contains(w, tc.want.warning) || (tc.want.warning == "" && w != "") {
				t.Errorf("warnings %q, want one containing %q", w, tc.want.warning)
			}
			// Idempotent: a second pass (reinvocation, or a pod written to look mutated) adds nothing.
			if again, err := c.Mutate(got); err != nil || len(again.Patch) != 0 {
				t.Errorf("second pass: %v %+v", err, again.Patch)
			}
		})
	}
}

// TestClassTermsSelect: what the written terms match on a node, evaluated the way the
// scheduler's InterPodAffinity does (each term's label selector against every pod there, its
// namespace selector against the pod's namespace): every other effective class — another value
// under either key in any namespace, or the same value in a namespace that does not share it —
// never the pod's own class and never unclassed pods such as node daemons, which are on every
// node.
func TestClassTermsSelect(t *testing.T) {
	c := cfg(ModeIPP)
	for _, tc := range []struct {
		name   string
		owners []string
		ns     string
		labels map[string]string
		match  bool
	}{
		{"same class, same namespace", []string{"red"}, "red", map[string]string{"ipp-class": "a"}, false},
		{"same class, other key", []string{"red"}, "red", map[string]string{"berth.dev/instance-class": "a"}, false},
		{"same class, both keys", []string{"red"}, "red", map[string]string{"ipp-class": "a", "berth.dev/instance-class": "a"}, false},
		{"same value, another namespace: another class", []string{"red"}, "blue", map[string]string{"ipp-class": "a"}, true},
		{"same value, another namespace, other key", []string{"red"}, "blue", map[string]string{"berth.dev/instance-class": "a"}, true},
		{"shared class, a namespace it is granted to", []string{"red", "blue"}, "blue", map[string]string{"ipp-class": "a"}, false},
		{"shared class, a namespace it is not granted to", []string{"red", "blue"}, "green", map[string]string{"ipp-class": "a"}, true},
		{"other class", []string{"red"}, "red", map[string]string{"ipp-class": "b"}, true},
		{"other class, other key, other namespace", []string{"red"}, "blue", map[string]string{"berth.dev/instance-class": "b", "app": "x"}, true},
		{"node daemon without a class", []string{"red"}, "kube-system", map[string]string{"k8s-app": "kube-proxy", "controller-revision-hash": "7d"}, false},
		{"no labels at all", []string{"red"}, "red", nil, false},
		// why: conservative; the plugin treats it as unclassed, the term as another class.
		{"empty class value", []string{"red"}, "red", map[string]string{"ipp-class": ""}, true},
	} {
		matched := false
		for _, term := range c.ClassTerms("a", tc.owners) {
			sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			if err != nil {
				t.Fatal(err)
			}
			nsSel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
			if term.NamespaceSelector == nil || len(term.Namespaces) > 0 || err != nil || term.TopologyKey != corev1.LabelHostname {
				t.Fatalf("term does not select by namespace labels on the host: %+v (%v)", term, err)
			}
			matched = matched || sel.Matches(labels.Set(tc.labels)) && nsSel.Matches(labels.Set{NamespaceNameLabel: tc.ns})
		}
		if matched != tc.match {
			t.Errorf("%s: pod of %s %v: matched %v, want %v", tc.name, tc.ns, tc.labels, matched, tc.match)
		}
	}
}

// TestMutateClassGrants: a class belongs to the pod's namespace unless an InstanceClass of
// that name shares it; a namespace the InstanceClass does not list is refused, with the field,
// the InstanceClass and the grant to ask for, in every mode (the scheduler would keep the pod
// apart anyway, but a tenant must learn at once that the value is taken).
func TestMutateClassGrants(t *testing.T) {
	grants := StaticGrants{"gold": {"red", "blue"}}
	for _, mode := range []Mode{ModeIPP, ModeBerth, ModeBoth} {
		for _, tc := range []struct {
			name, ns string
			labels   map[string]string
			owners   []string // the owner term's namespaces (modes ipp, both)
			refused  string
		}{
			{"ungranted class: the pod's namespace owns it", "green", map[string]string{"ipp-class": "silver"}, []string{"green"}, ""},
			{"granted class, a listed namespace", "blue", map[string]string{"ipp-class": "gold"}, []string{"red", "blue"}, ""},
			{"granted class under the other key", "red", map[string]string{"berth.dev/instance-class": "gold"}, []string{"red", "blue"}, ""},
			{"granted class, a namespace not listed", "green", map[string]string{"ipp-class": "gold"}, nil,
				"metadata.labels[ipp-class]: instance class gold belongs to the namespaces InstanceClass gold grants it to (red, blue), not to green; " +
					"ask a cluster administrator to add green to spec.namespaces of InstanceClass gold (kubectl edit instanceclass gold), " +
					"or use a class value that no InstanceClass names, which belongs to namespace green alone"},
			{"granted class under the second key, a namespace not listed", "green", map[string]string{"berth.dev/instance-class": "gold"}, nil,
				"metadata.labels[berth.dev/instance-class]: instance class gold belongs to"},
		} {
			t.Run(string(mode)+"/"+tc.name, func(t *testing.T) {
				c := cfg(mode)
				c.Classes = grants
				p := pod(tc.labels, nil)
				p.Namespace = tc.ns
				if tc.refused != "" {
					res, err := c.Mutate(p)
					if err == nil || !strings.HasPrefix(err.Error(), tc.refused) || len(res.Patch) > 0 {
						t.Fatalf("got %v (patch %d ops), want a refusal starting %q", err, len(res.Patch), tc.refused)
					}
					return
				}
				got, _ := apply(t, c, p)
				_, class, _ := ClassOf(tc.labels, c.ClassLabels)
				for _, key := range c.ClassLabels {
					if h := hasTerm(antiTerms(got), OwnerTerm(key, class, tc.owners)); h != (mode != ModeBerth) {
						t.Errorf("owner term %s NotIn %v present %v: %+v", key, tc.owners, h, antiTerms(got))
					}
				}
			})
		}
	}
}

// TestMutateGrantLookupFails: when the InstanceClasses cannot be read the pod is refused, not
// guessed about: admitting it as its namespace's class could join a shared class's pods (the
// scheduler would still keep it apart), and a grant cannot be checked.
func TestMutateGrantLookupFails(t *testing.T) {
	c := cfg(ModeBerth)
	c.Classes = failingGrants{}
	if _, err := c.Mutate(pod(classA, nil)); err == nil || !strings.Contains(err.Error(), "cache not synced") {
		t.Fatalf("got %v, want the lookup's error", err)
	}
}

type failingGrants struct{}

func (failingGrants) Grant(string) ([]string, bool, error) {
	return nil, false, fmt.Errorf("reading InstanceClass a: cache not synced")
}

// TestMutateLeavesAlone: pods without a class and without a way into the pool, mirror pods
// and every pod of an exempt namespace pass unchanged.
func TestMutateLeavesAlone(t *testing.T) {
	dsRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "u", Controller: ptrTo(true)}
	inKubeSystem := func(mod func(*corev1.Pod)) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Namespace = "kube-system"; mod(p) }
	}
	for _, mode := range []Mode{ModeIPP, ModeBerth, ModeBoth} {
		for _, tc := range []struct {
			name   string
			pod    *corev1.Pod
			exempt bool
		}{
			{"no class", pod(map[string]string{"app": "x"}, nil), false},
			{"empty class", pod(map[string]string{"ipp-class": ""}, nil), false},
			{"no labels", pod(nil, nil), false},
			{"no class, another taint tolerated", pod(nil, func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{userTol} }), false},
			{"no class, nodeSelector ipp=false", pod(nil, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"ipp": "false"} }), false},
			// why: an unclassed DaemonSet that neither tolerates nor selects the pool stays off it.
			{"no class, DaemonSet", pod(nil, func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{dsRef} }), false},
			{"mirror", pod(classA, func(p *corev1.Pod) { p.Annotations = map[string]string{MirrorPodAnnotation: "x"} }), true},
			{"mirror with nodeName", pod(classA, func(p *corev1.Pod) {
				p.Spec.NodeName = "n1"
				p.Annotations = map[string]string{MirrorPodAnnotation: "x"}
			}), true},
			{"unclassed mirror tolerating everything", pod(nil, func(p *corev1.Pod) {
				p.Annotations = map[string]string{MirrorPodAnnotation: "x"}
				p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}), true},
			// why: "plain" is not a pool node (testNodes, nodename_test.go).
			{"no class with nodeName", pod(map[string]string{"app": "x"}, func(p *corev1.Pod) { p.Spec.NodeName = "plain" }), false},
			{"kube-system: classed DaemonSet", pod(classA, inKubeSystem(func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{dsRef} })), true},
			{"kube-system: unclassed, tolerating everything", pod(nil, inKubeSystem(func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			})), true},
			{"kube-system: classed pod is not mutated", pod(classA, inKubeSystem(func(*corev1.Pod) {})), true},
			{"kube-system: conflicting classes", pod(map[string]string{"ipp-class": "a", "berth.dev/instance-class": "b"}, inKubeSystem(func(*corev1.Pod) {})), true},
		} {
			c := cfg(mode)
			c.Nodes = testNodes()
			res, err := c.Mutate(tc.pod)
			if err != nil || len(res.Patch) != 0 || len(res.Warnings) != 0 {
				t.Errorf("%s/%s: %v %+v", mode, tc.name, err, res)
			}
			if (res.Exempt != "") != tc.exempt {
				t.Errorf("%s/%s: exemption %q, want exempt %v", mode, tc.name, res.Exempt, tc.exempt)
			}
		}
	}
}

// TestMutateRefuses: bad classes get a message naming the labels, never a patch.
func TestMutateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		msg    string
	}{
		{"conflicting keys", map[string]string{"ipp-class": "a", "berth.dev/instance-class": "b"}, "conflicting instance classes: ipp-class=a, berth.dev/instance-class=b"},
		{"invalid value", map[string]string{"ipp-class": "a b"}, `instance class ipp-class="a b" is not a valid label value`},
		{"too long", map[string]string{"berth.dev/instance-class": strings.Repeat("x", 64)}, "must be no more than 63"},
		{"node named", classA, `pod of instance class a sets spec.nodeName "n1", which bypasses the scheduler`},
	} {
		for _, mode := range []Mode{ModeIPP, ModeBerth, ModeBoth} {
			c := cfg(mode)
			res, err := c.Mutate(pod(tc.labels, func(p *corev1.Pod) {
				withUserSpec(p)
				if tc.name == "node named" {
					p.Spec.NodeName = "n1"
				}
			}))
			var r *Refusal
			if err == nil || !strings.Contains(err.Error(), tc.msg) || len(res.Patch) != 0 {
				t.Errorf("%s/%s: err %v patch %v, want a refusal containing %q", tc.name, mode, err, res.Patch, tc.msg)
			} else if !asRefusal(err, &r) {
				t.Errorf("%s: %T is not a *Refusal", tc.name, err)
			}
		}
	}
	// Same class under both keys is fine.
	c := cfg(ModeBerth)
	if _, err := c.Mutate(pod(map[string]string{"ipp-class": "a", "berth.dev/instance-class": "a"}, nil)); err != nil {
		t.Errorf("same class under both keys: %v", err)
	}
}

func asRefusal(err error, r **Refusal) bool {
	v, ok := err.(*Refusal)
	*r = v
	return ok
}

// TestMutateEdgeShapes: shapes of affinity the merge must handle without replacing anything.
func TestMutateEdgeShapes(t *testing.T) {
	shapes := map[string]func(*corev1.Pod){
		"empty affinity":       func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{} },
		"node affinity no req": func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}} },
		"term without exprs": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: userTerms[1:]}}}
		},
		"empty terms list": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{}}}}
		},
		"anti without required": func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}} },
		"pool toleration present": func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "ipp", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		},
		"pool affinity already in one term": func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "ipp", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}, userTerms[0]}}}}
		},
	}
	for name, mod := range shapes {
		for _, mode := range []Mode{ModeIPP, ModeBerth, ModeBoth} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				c := cfg(mode)
				p := pod(classA, func(p *corev1.Pod) { mod(p); p.OwnerReferences = []metav1.OwnerReference{rsRef} })
				got, _ := apply(t, c, p)
				if len(got.Spec.Tolerations) != max(1, len(p.Spec.Tolerations)) {
					t.Errorf("tolerations %+v", got.Spec.Tolerations)
				}
				for i, term := range got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
					n := 0
					for _, e := range term.MatchExpressions {
						if e.Key == "ipp" {
							n++
						}
					}
					if n != 1 {
						t.Errorf("term %d has the pool requirement %d times", i, n)
					}
				}
				if again, _ := c.Mutate(got); len(again.Patch) != 0 {
					t.Errorf("not idempotent: %+v", again.Patch)
				}
			})
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"ok", func(*Config) {}, ""},
		{"mode", func(c *Config) { c.Mode = "strict" }, "mode"},
		{"no labels", func(c *Config) { c.ClassLabels = nil }, "classLabels"},
		{"bad label", func(c *Config) { c.ClassLabels = []string{"a b"} }, "classLabels[0]"},
		{"dup label", func(c *Config) { c.ClassLabels = []string{"x", "x"} }, "classLabels[1]"},
		{"pool value", func(c *Config) { c.PoolValue = "no good" }, "poolLabel.value"},
		{"taint key", func(c *Config) { c.TaintKey = "" }, "poolTaint.key"},
		{"taint effect", func(c *Config) { c.TaintEffect = "Never" }, "poolTaint.effect"},
		{"default scheduler", func(c *Config) { c.SchedulerName = "default-scheduler" }, "schedulerName"},
		{"same isolated", func(c *Config) { c.IsolatedSchedulerName = c.SchedulerName }, "isolatedSchedulerName"},
		{"no exempt namespace", func(c *Config) { c.ExemptNamespaces = nil }, ""},
		{"bad exempt namespace", func(c *Config) { c.ExemptNamespaces = []string{"kube-system", "Kube_System"} }, "exemptNamespaces[1]"},
		{"dup exempt namespace", func(c *Config) { c.ExemptNamespaces = []string{"a", "a"} }, "exemptNamespaces[1]"},
	} {
		c := Defaults()
		tc.mod(&c)
		errs := c.Validate()
		if tc.field == "" && len(errs) > 0 || tc.field != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.field)) {
			t.Errorf("%s: %v, want an error on %q", tc.name, errs, tc.field)
		}
	}
	if k, v, e, err := ParseTaint("node-restriction.kubernetes.io/ipp=true:NoSchedule"); err != nil || k != "node-restriction.kubernetes.io/ipp" || v != "true" || e != corev1.TaintEffectNoSchedule {
		t.Errorf("ParseTaint: %s %s %s %v", k, v, e, err)
	}
	for _, bad := range []string{"ipp", "ipp=true", "=x:NoSchedule"} {
		if _, _, _, err := ParseTaint(bad); err == nil {
			t.Errorf("ParseTaint(%q) accepted", bad)
		}
	}
}
