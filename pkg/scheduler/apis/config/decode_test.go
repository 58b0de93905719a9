package config

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1 "github.com/berth-sched/berth/api/config/v1"
)

// TestDecode: one strict decoder for every plugin's args; each error names its field.
func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, ct, raw string
		wantErr       string
		check         func(*configv1.DecisionRecordArgs) bool
	}{
		{"json", runtime.ContentTypeJSON, `{"records":5,"topNodes":3}`, "", func(a *configv1.DecisionRecordArgs) bool { return *a.Records == 5 && *a.TopNodes == 3 }},
		{"yaml", runtime.ContentTypeYAML, "records: 7\nkind: DecisionRecordArgs\n", "", func(a *configv1.DecisionRecordArgs) bool { return *a.Records == 7 && a.Kind == "DecisionRecordArgs" }},
		{"apiVersion and kind", runtime.ContentTypeJSON, `{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"DecisionRecordArgs","records":2}`, "", func(a *configv1.DecisionRecordArgs) bool { return *a.Records == 2 }},
		{"kind of no plugin", runtime.ContentTypeYAML, "records: 7\nkind: X\n", `kind: Invalid value: "X": must be DecisionRecordArgs or omitted`, nil},
		{"another plugin's kind", runtime.ContentTypeJSON, `{"kind":"SySchedArgs"}`, `kind: Invalid value: "SySchedArgs": must be DecisionRecordArgs or omitted`, nil},
		{"no content type is JSON", "", `{"records":1}`, "", func(a *configv1.DecisionRecordArgs) bool { return *a.Records == 1 }},
		{"empty", runtime.ContentTypeJSON, "  ", "", func(a *configv1.DecisionRecordArgs) bool { return a.Records == nil }},
		{"key in other case", runtime.ContentTypeJSON, `{"Records":5}`, `Records: Unsupported value: unknown field "Records"; supported fields: records, topNodes, summary`, nil},
		{"unknown key", runtime.ContentTypeJSON, `{"record":5}`, `record: Unsupported value`, nil},
		{"duplicate key", runtime.ContentTypeJSON, `{"records":5,"records":6}`, `records: Duplicate value: duplicate field "records"`, nil},
		{"wrong type names the field", runtime.ContentTypeJSON, `{"records":"many"}`, `records: Invalid value: "many"`, nil},
		{"not an object", runtime.ContentTypeJSON, `[1]`, "cannot unmarshal", nil},
		{"invalid JSON", runtime.ContentTypeJSON, `{not json`, "invalid character", nil},
		{"other content type", "application/vnd.kubernetes.protobuf", `x`, `unsupported content type`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a configv1.DecisionRecordArgs
			err := Decode(&runtime.Unknown{Raw: []byte(tc.raw), ContentType: tc.ct}, &a)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(&a) {
				t.Fatalf("err = %v, args %+v", err, a)
			}
		})
	}
}

// TestParse: nil, raw and typed args all come out defaulted and validated; typed args are
// copied; any other object is refused naming its type.
func TestParse(t *testing.T) {
	got, err := Parse(nil, "DecisionRecord", ValidateDecisionRecordArgs)
	if err != nil || *got.Records != configv1.DefaultRecords || *got.Summary != configv1.SummaryNone {
		t.Fatalf("nil: %v %+v", err, got)
	}
	in := &configv1.DecisionRecordArgs{TopNodes: new(int32(3))}
	got, err = Parse(in, "DecisionRecord", ValidateDecisionRecordArgs)
	if err != nil || got == in || in.Records != nil || *got.TopNodes != 3 {
		t.Fatalf("typed: err %v, aliased %v, input defaulted %v", err, got == in, in.Records != nil)
	}
	if _, err := Parse(&v1.Pod{}, "DecisionRecord", ValidateDecisionRecordArgs); err == nil || !strings.Contains(err.Error(), "*v1.Pod") {
		t.Errorf("wrong object type: %v", err)
	}
	_, err = Parse(&runtime.Unknown{Raw: []byte(`{"records":0}`)}, "DecisionRecord", ValidateDecisionRecordArgs)
	if err == nil || !strings.Contains(err.Error(), "DecisionRecord args: records: Invalid value: 0") {
		t.Errorf("invalid: %v", err)
	}
}

// TestValidateNamesTheCallersPath: the operator passes the CR's own path and gets it back.
func TestValidateNamesTheCallersPath(t *testing.T) {
	a := &configv1.TargetLoadPackingArgs{TargetUtilization: new(int64(0))}
	a.WatcherAddress = "http://w:1"
	Scheme.Default(a)
	root := field.NewPath("spec", "plugins", "targetLoadPacking", "args")
	errs := ValidateTargetLoadPackingArgs(root, a)
	if len(errs) != 1 || errs[0].Field != "spec.plugins.targetLoadPacking.args.targetUtilization" {
		t.Fatalf("errs = %v", errs)
	}
}

// TestDecimal: a decimal decodes from a string (CRDs) or a number (upstream configurations),
// encodes as the string the CRD schema wants, and says when it is not one.
func TestDecimal(t *testing.T) {
	for _, tc := range []struct {
		in, wantJSON string
		want         float64
		bad          bool
	}{
		{in: `"1.5"`, wantJSON: `"1.5"`, want: 1.5},
		{in: `1.5`, wantJSON: `"1.5"`, want: 1.5},
		{in: `2`, wantJSON: `"2"`, want: 2},
		{in: `"1.0"`, wantJSON: `"1.0"`, want: 1},
		{in: `" 1.25 "`, wantJSON: `"1.25"`, want: 1.25},
		{in: `"abc"`, wantJSON: `"abc"`, bad: true},
	} {
		var d configv1.Decimal
		if err := d.UnmarshalJSON([]byte(tc.in)); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		f, err := d.Float64()
		if (err != nil) != tc.bad || (!tc.bad && f != tc.want) {
			t.Errorf("%s: Float64 = %v, %v", tc.in, f, err)
		}
		if j, _ := d.MarshalJSON(); string(j) != tc.wantJSON {
			t.Errorf("%s: encodes as %s, want %s", tc.in, j, tc.wantJSON)
		}
	}
	var d configv1.Decimal
	if err := d.UnmarshalJSON([]byte(`true`)); err == nil {
		t.Error("a boolean decoded as a decimal")
	}
}

// TestWorkloadProfileArgs: the shared workloadProfiles block defaults when absent and names
// each bad field at the caller's path, maxSamples against minSiblings too.
func TestWorkloadProfileArgs(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		wantErr   []string
		check     func(*configv1.WorkloadProfileArgs) bool
	}{
		{"absent: defaults, on", `{"watcherAddress":"http://w:1"}`, nil, func(a *configv1.WorkloadProfileArgs) bool {
			return *a.Enabled && *a.MinSiblings == 3 && *a.Percentile == 90 && *a.MaxSpreadPercent == 50 &&
				*a.MarginPercent == 100 && *a.MaxWorkloads == 10000 && *a.MaxSamples == 64 && *a.MaxAgeSeconds == 3600 && *a.MinAgeSeconds == 60 &&
				*a.NamespaceMinPods == 0
		}},
		{"off", `{"watcherAddress":"http://w:1","workloadProfiles":{"enabled":false}}`, nil, func(a *configv1.WorkloadProfileArgs) bool {
			return !*a.Enabled && *a.MinSiblings == 3
		}},
		{"set", `{"watcherAddress":"http://w:1","workloadProfiles":{"minSiblings":5,"percentile":95,"maxSamples":5}}`, nil, func(a *configv1.WorkloadProfileArgs) bool {
			return *a.MinSiblings == 5 && *a.Percentile == 95 && *a.MaxSamples == 5
		}},
		{"out of range", `{"watcherAddress":"http://w:1","workloadProfiles":{"minSiblings":0,"percentile":101,"maxSpreadPercent":-1,"marginPercent":1001,"maxWorkloads":0,"maxAgeSeconds":0,"minAgeSeconds":3601,"namespaceMinPods":257}}`,
			[]string{"workloadProfiles.minSiblings: Invalid value: 0", "workloadProfiles.percentile: Invalid value: 101",
				"workloadProfiles.maxSpreadPercent: Invalid value: -1", "workloadProfiles.marginPercent: Invalid value: 1001",
				"workloadProfiles.maxWorkloads: Invalid value: 0", "workloadProfiles.maxAgeSeconds: Invalid value: 0",
				"workloadProfiles.minAgeSeconds: Invalid value: 3601", "workloadProfiles.namespaceMinPods: Invalid value: 257"}, nil},
		{"fewer samples than siblings", `{"watcherAddress":"http://w:1","workloadProfiles":{"minSiblings":10,"maxSamples":9}}`,
			[]string{"workloadProfiles.maxSamples: Invalid value: 9: must be between 10 and 10000"}, nil},
		{"unknown field", `{"watcherAddress":"http://w:1","workloadProfiles":{"minSibling":3}}`,
			[]string{`workloadProfiles.minSibling: Unsupported value`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(&runtime.Unknown{Raw: []byte(tc.raw), ContentType: runtime.ContentTypeJSON}, "LoadVariationRiskBalancing", ValidateLoadVariationRiskBalancingArgs)
			if len(tc.wantErr) > 0 {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v, want it to say %q", err, w)
					}
				}
				return
			}
			if err != nil || !tc.check(got.WorkloadProfiles) {
				t.Fatalf("err = %v, workloadProfiles %+v", err, got.WorkloadProfiles)
			}
		})
	}
}
