package pluginargs

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

type args struct {
	Kind    string   `json:"kind,omitempty"`
	Records *int32   `json:"records,omitempty"`
	Names   []string `json:"names,omitempty"`
}

func TestDecode(t *testing.T) {
	fields := []string{"records", "names"}
	for _, tc := range []struct {
		name, ct, raw string
		wantErr       string
		check         func(*args) bool
	}{
		{"json", runtime.ContentTypeJSON, `{"records":5,"names":["a"]}`, "", func(a *args) bool { return *a.Records == 5 && a.Names[0] == "a" }},
		{"yaml", runtime.ContentTypeYAML, "records: 7\nkind: X\n", "", func(a *args) bool { return *a.Records == 7 }},
		{"no content type is JSON", "", `{"records":1}`, "", func(a *args) bool { return *a.Records == 1 }},
		{"empty", runtime.ContentTypeJSON, "  ", "", func(a *args) bool { return a.Records == nil }},
		{"key in other case", runtime.ContentTypeJSON, `{"Records":5}`, `Records: Unsupported value: "Records": supported values: "records", "names"`, nil},
		{"unknown key", runtime.ContentTypeJSON, `{"record":5}`, `record: Unsupported value`, nil},
		{"wrong type names the field", runtime.ContentTypeJSON, `{"records":"many"}`, `records: Invalid value: "string": must be a int32`, nil},
		{"not an object", runtime.ContentTypeJSON, `[1]`, "cannot unmarshal", nil},
		{"other content type", "application/vnd.kubernetes.protobuf", `x`, `unsupported content type`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a args
			_, err := Decode(&runtime.Unknown{Raw: []byte(tc.raw), ContentType: tc.ct}, &a, fields)
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
