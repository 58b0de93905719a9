package instanceisolation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestParseArgs(t *testing.T) {
	js := func(s string) runtime.Object {
		return &runtime.Unknown{Raw: []byte(s), ContentType: runtime.ContentTypeJSON}
	}
	cases := []struct {
		name   string
		in     runtime.Object
		err    string // substring; "" = valid
		labels []string
		strict bool
		spread bool
	}{
		{name: "nil gives defaults", labels: DefaultClassLabels},
		{name: "empty object", in: js(`{}`), labels: DefaultClassLabels},
		{name: "yaml all fields", in: &runtime.Unknown{ContentType: runtime.ContentTypeYAML, Raw: []byte(
			"classLabels: [tenant, example.com/class]\nstrict: true\nspreadReplicas: true\nexemptNamespaces: [kube-system]\nexemptSelector: {matchLabels: {a: b}}\n")},
			labels: []string{"tenant", "example.com/class"}, strict: true, spread: true},
		{name: "typed", in: &Args{ClassLabels: []string{"x"}, Strict: boolp(true)}, labels: []string{"x"}, strict: true},
		{name: "explicit empty classLabels", in: js(`{"classLabels":[]}`), err: "classLabels: Required value"},
		{name: "typed empty classLabels", in: &Args{ClassLabels: []string{}}, err: "classLabels: Required value"},
		{name: "bad label key", in: js(`{"classLabels":["ipp class"]}`), err: `classLabels[0]: Invalid value: "ipp class": must be a label key`},
		{name: "bad label prefix", in: js(`{"classLabels":["ok","Bad_Prefix/x"]}`), err: `classLabels[1]: Invalid value: "Bad_Prefix/x"`},
		{name: "duplicate label key", in: js(`{"classLabels":["a","a"]}`), err: `classLabels[1]: Duplicate value: "a"`},
		{name: "bad namespace", in: js(`{"exemptNamespaces":["Kube_System"]}`), err: `exemptNamespaces[0]: Invalid value: "Kube_System"`},
		{name: "duplicate namespace", in: js(`{"exemptNamespaces":["a","a"]}`), err: `exemptNamespaces[1]: Duplicate value`},
		{name: "bad selector operator", in: js(`{"exemptSelector":{"matchExpressions":[{"key":"a","operator":"Near"}]}}`),
			err: "exemptSelector.matchExpressions[0].operator: Invalid value"},
		{name: "bad selector key", in: &Args{ExemptSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a b": "c"}}},
			err: "exemptSelector.matchLabels: Invalid value: \"a b\""},
		{name: "wrong type", in: js(`{"strict":"yes"}`), err: "strict: Invalid value"},
		{name: "unknown field", in: js(`{"weight":3}`), err: "weight: Unsupported value"},
		{name: "case-mismatched field", in: js(`{"Strict":true}`), err: "Strict: Unsupported value"},
		{name: "foreign content type", in: &runtime.Unknown{Raw: []byte(`{}`), ContentType: "application/vnd.kubernetes.protobuf"}, err: "unsupported content type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseArgs(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalStrings(a.ClassLabels, tc.labels) || *a.Strict != tc.strict || *a.SpreadReplicas != tc.spread {
				t.Fatalf("got %v strict %v spread %v, want %v %v %v", a.ClassLabels, *a.Strict, *a.SpreadReplicas, tc.labels, tc.strict, tc.spread)
			}
		})
	}
}

// TestParseArgsDoesNotAlias: defaulting must not write into the caller's object, nor share
// the package default slice.
func TestParseArgsDoesNotAlias(t *testing.T) {
	in := &Args{}
	a, err := ParseArgs(in)
	if err != nil {
		t.Fatal(err)
	}
	if in.Strict != nil || in.ClassLabels != nil {
		t.Fatalf("caller's args were defaulted in place: %+v", in)
	}
	a.ClassLabels[0] = "changed"
	if DefaultClassLabels[0] != "ipp-class" {
		t.Fatal("the defaults share their slice with parsed args")
	}
}
