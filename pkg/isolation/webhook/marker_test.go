package webhook

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-sched/berth/pkg/isolation/classmarker"
)

func mreq(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// TestMutateMarkerTerms: every required term T becomes T+pool+marker In [value] and, after
// all of them, T+pool+marker DoesNotExist; in every mode, from every shape of affinity, with
// the user's terms kept and a second pass adding nothing.
func TestMutateMarkerTerms(t *testing.T) {
	pool := mreq("ipp", corev1.NodeSelectorOpIn, "true")
	zone := mreq("zone", corev1.NodeSelectorOpIn, "z1")
	name := mreq("metadata.name", corev1.NodeSelectorOpIn, "n7")
	in := func(v string) corev1.NodeSelectorRequirement { return mreq(MarkerKey, corev1.NodeSelectorOpIn, v) }
	none := mreq(MarkerKey, corev1.NodeSelectorOpDoesNotExist)
	term := func(rs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: rs}
	}
	required := func(ts ...corev1.NodeSelectorTerm) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts}}}
		}
	}
	own := in("ns_a")
	cases := []struct {
		name   string
		grants StaticGrants
		mod    func(*corev1.Pod)
		want   []corev1.NodeSelectorTerm
	}{
		{name: "no affinity", want: []corev1.NodeSelectorTerm{term(pool, own), term(pool, none)}},
		{name: "affinity without nodeAffinity", mod: func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}} },
			want: []corev1.NodeSelectorTerm{term(pool, own), term(pool, none)}},
		{name: "nodeAffinity with preferred only", mod: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: term(zone)}}}}
		}, want: []corev1.NodeSelectorTerm{term(pool, own), term(pool, none)}},
		{name: "required with nil terms", mod: required(), want: []corev1.NodeSelectorTerm{term(pool, own), term(pool, none)}},
		{name: "required with an empty list", mod: func(p *corev1.Pod) {
			required()(p)
			p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = []corev1.NodeSelectorTerm{}
		}, want: []corev1.NodeSelectorTerm{term(pool, own), term(pool, none)}},
		{name: "two user terms, one by field", mod: required(term(zone), corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{name}}),
			want: []corev1.NodeSelectorTerm{term(zone, pool, own), {MatchExpressions: []corev1.NodeSelectorRequirement{pool, own}, MatchFields: []corev1.NodeSelectorRequirement{name}},
				term(zone, pool, none), {MatchExpressions: []corev1.NodeSelectorRequirement{pool, none}, MatchFields: []corev1.NodeSelectorRequirement{name}}}},
		{name: "user term already on the pool", mod: required(term(pool, zone)), want: []corev1.NodeSelectorTerm{term(pool, zone, own), term(pool, zone, none)}},
		{name: "user term requiring its own marker: no unmarked copy", mod: required(term(zone, own)), want: []corev1.NodeSelectorTerm{term(zone, own, pool)}},
		{name: "user term staying off marked nodes", mod: required(term(none)), want: []corev1.NodeSelectorTerm{term(none, pool)}},
		{name: "class shared by an InstanceClass", grants: StaticGrants{"a": {"ns", "other"}}, want: []corev1.NodeSelectorTerm{term(pool, in("a")), term(pool, none)}},
		{name: "InstanceClass listing the namespace alone is still shared", grants: StaticGrants{"a": {"ns"}}, want: []corev1.NodeSelectorTerm{term(pool, in("a")), term(pool, none)}},
	}
	for _, mode := range []Mode{ModeIPP, ModeBerth, ModeBoth} {
		for _, tc := range cases {
			t.Run(string(mode)+"/"+tc.name, func(t *testing.T) {
				c := cfg(mode)
				if tc.grants != nil {
					c.Classes = tc.grants
				}
				got, _ := apply(t, c, pod(classA, tc.mod))
				terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if !reflect.DeepEqual(terms, tc.want) {
					t.Fatalf("terms\n%+v\nwant\n%+v", terms, tc.want)
				}
				if again, err := c.Mutate(got); err != nil || len(again.Patch) != 0 {
					t.Fatalf("second pass: %v %+v", err, again.Patch)
				}
			})
		}
	}
	t.Run("marker off: one term, no marker", func(t *testing.T) {
		c := cfg(ModeBerth)
		c.AutoscalerMarker = false
		got, _ := apply(t, c, pod(classA, required(term(zone))))
		if terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; !reflect.DeepEqual(terms, []corev1.NodeSelectorTerm{term(zone, pool)}) {
			t.Fatalf("terms %+v", terms)
		}
	})
	t.Run("value is classmarker's", func(t *testing.T) {
		if want := classmarker.MarkerValue(classmarker.NamespaceClass("ns", "a")); want != "ns_a" {
			t.Fatalf("test assumes ns_a, classmarker says %q", want)
		}
	})
}

// TestMutateMarkerRefusals: a pod selecting another class's marker (nodeSelector, a required
// or a preferred term), or a pod without a class selecting the marker at all, is refused naming
// the field, the marker key and the value; its own value and DoesNotExist pass.
func TestMutateMarkerRefusals(t *testing.T) {
	sel := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{MarkerKey: v} }
	}
	reqd := func(rs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{mreq("zone", corev1.NodeSelectorOpExists)}}, {MatchExpressions: rs}}}}}
		}
	}
	pref := func(rs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: rs}}}}}
		}
	}
	const rule = "; a pod of instance class a may select the marker " + MarkerKey + " only with its own class's value, which the isolation webhook writes itself"
	const unclassedRule = "; only pods of an instance class (label ipp-class or berth.dev/instance-class) may select the marker " + MarkerKey +
		", and only with their own class's value, which the isolation webhook writes itself"
	cases := []struct {
		name    string
		labels  map[string]string
		grants  StaticGrants
		mod     func(*corev1.Pod)
		refused string // "" admitted
	}{
		{name: "another namespace's class by nodeSelector", labels: classA, mod: sel("other_a"),
			refused: "spec.nodeSelector[" + MarkerKey + "]: selects the isolation marker " + MarkerKey + "=other_a" + rule},
		{name: "another class in a required term", labels: classA, mod: reqd(mreq(MarkerKey, corev1.NodeSelectorOpIn, "ns_a", "ns_b")),
			refused: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[0]: selects the isolation marker " + MarkerKey + " In [ns_a, ns_b]" + rule},
		{name: "any marked node (Exists)", labels: classA, mod: reqd(mreq("zone", corev1.NodeSelectorOpExists), mreq(MarkerKey, corev1.NodeSelectorOpExists)),
			refused: "nodeSelectorTerms[1].matchExpressions[1]: selects the isolation marker " + MarkerKey + " Exists" + rule},
		{name: "NotIn its own value", labels: classA, mod: reqd(mreq(MarkerKey, corev1.NodeSelectorOpNotIn, "ns_a")),
			refused: "selects the isolation marker " + MarkerKey + " NotIn [ns_a]" + rule},
		{name: "Gt", labels: classA, mod: reqd(mreq(MarkerKey, corev1.NodeSelectorOpGt, "1")), refused: MarkerKey + " Gt [1]" + rule},
		{name: "preferred term towards another class", labels: classA, mod: pref(mreq(MarkerKey, corev1.NodeSelectorOpIn, "blue_a")),
			refused: "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]: selects the isolation marker " + MarkerKey + " In [blue_a]" + rule},
		{name: "shared class value of a class not granted here", labels: map[string]string{"ipp-class": "b"}, grants: StaticGrants{"gold": {"blue"}}, mod: sel("gold"),
			refused: MarkerKey + "=gold; a pod of instance class b may select"},
		{name: "own value by nodeSelector", labels: classA, mod: sel("ns_a")},
		{name: "own value in a required term", labels: classA, mod: reqd(mreq(MarkerKey, corev1.NodeSelectorOpIn, "ns_a"))},
		{name: "own shared value", labels: classA, grants: StaticGrants{"a": {"ns"}}, mod: sel("a")},
		{name: "DoesNotExist", labels: classA, mod: reqd(mreq(MarkerKey, corev1.NodeSelectorOpDoesNotExist))},
		{name: "unclassed: nodeSelector", mod: sel("ns_a"), refused: "spec.nodeSelector[" + MarkerKey + "]: selects the isolation marker " + MarkerKey + "=ns_a" + unclassedRule},
		{name: "unclassed: preferred Exists", mod: pref(mreq(MarkerKey, corev1.NodeSelectorOpExists)), refused: "preference.matchExpressions[0]: selects the isolation marker " + MarkerKey + " Exists" + unclassedRule},
		{name: "unclassed: DoesNotExist", mod: reqd(mreq(MarkerKey, corev1.NodeSelectorOpDoesNotExist))},
		{name: "unclassed in an exempt namespace", mod: func(p *corev1.Pod) { sel("ns_a")(p); p.Namespace = "kube-system" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg(ModeBerth)
			if tc.grants != nil {
				c.Classes = tc.grants
			}
			res, err := c.Mutate(pod(tc.labels, tc.mod))
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.HasSuffix(err.Error(), tc.refused) && !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("got %v, want a refusal containing %q", err, tc.refused)
			}
			if len(res.Patch) != 0 {
				t.Fatalf("a refusal carries a patch: %+v", res.Patch)
			}
			// why: with the marker off nothing about it is refused.
			c.AutoscalerMarker = false
			if _, err := c.Mutate(pod(tc.labels, tc.mod)); err != nil && strings.Contains(err.Error(), "marker") {
				t.Fatalf("marker off, still refused: %v", err)
			}
		})
	}
}

// TestMarkerFlags: --isolation-autoscaler-marker defaults on, the writer runs only with the
// webhook, and a negative grace stops the operator naming the flag.
func TestMarkerFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		on      bool
		grace   time.Duration
		wantErr string
	}{
		{args: []string{"--isolation-webhook", "--isolation-webhook-secret=ns/s"}, on: true, grace: 2 * time.Minute},
		{args: []string{"--isolation-webhook", "--isolation-webhook-secret=ns/s", "--isolation-marker-empty-grace=10s"}, on: true, grace: 10 * time.Second},
		{args: []string{"--isolation-webhook", "--isolation-webhook-secret=ns/s", "--isolation-autoscaler-marker=false"}},
		{args: []string{"--isolation-webhook-secret=ns/s"}},
		{args: []string{"--isolation-webhook", "--isolation-webhook-secret=ns/s", "--isolation-marker-empty-grace=-1s"},
			wantErr: "--isolation-marker-empty-grace -1s: must not be negative"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("operator", flag.ContinueOnError)
			f := BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			on, c, grace, err := f.Marker()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || f.Check() == nil {
					t.Fatalf("Marker: %v, want %q (and Check failing)", err, tc.wantErr)
				}
				return
			}
			if err != nil || on != tc.on || grace != tc.grace || (on && !c.AutoscalerMarker) {
				t.Fatalf("Marker: on %v grace %s config marker %v err %v; want on %v grace %s", on, grace, c.AutoscalerMarker, err, tc.on, tc.grace)
			}
		})
	}
}
