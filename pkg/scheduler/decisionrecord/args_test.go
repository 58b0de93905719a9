package decisionrecord

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name, raw, ctype string
		records, top     int32
		summary          Summary
		wantErr          string
	}{
		{name: "empty gets defaults", raw: ``, records: DefaultRecords, top: DefaultTopNodes, summary: SummaryNone},
		{name: "json", raw: `{"records":5,"topNodes":3,"summary":"Event"}`, records: 5, top: 3, summary: SummaryEvent},
		{name: "yaml", raw: "records: 7\nsummary: Event\n", ctype: runtime.ContentTypeYAML, records: 7, top: DefaultTopNodes, summary: SummaryEvent},
		{name: "zero records", raw: `{"records":0}`, wantErr: "records: Invalid value: 0"},
		{name: "too many records", raw: `{"records":1000001}`, wantErr: "records"},
		{name: "negative top", raw: `{"topNodes":-1}`, wantErr: "topNodes"},
		{name: "unknown summary", raw: `{"summary":"Log"}`, wantErr: `summary: Unsupported value: "Log"`},
		{name: "wrong case key", raw: `{"Records":5}`, wantErr: "Records: Unsupported value"},
		{name: "wrong type", raw: `{"records":"many"}`, wantErr: "records: Invalid value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseArgs(&runtime.Unknown{Raw: []byte(tc.raw), ContentType: tc.ctype})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *a.Records != tc.records || *a.TopNodes != tc.top || *a.Summary != tc.summary {
				t.Fatalf("got %d %d %s", *a.Records, *a.TopNodes, *a.Summary)
			}
		})
	}
}

type fakeRegistrar map[string]*Args

func (f fakeRegistrar) EnableProfile(p string, a *Args) { f[p] = a }

// The bound factory enables the profile it is built for; bad args enable nothing.
func TestFactoryEnablesProfile(t *testing.T) {
	reg := fakeRegistrar{}
	f := NewFactory(reg)
	if _, err := f(context.Background(), &runtime.Unknown{Raw: []byte(`{"records":0}`)}, profileHandle("bad")); err == nil {
		t.Fatal("bad args accepted")
	}
	if _, err := f(context.Background(), nil, profileHandle("p1")); err != nil {
		t.Fatal(err)
	}
	if len(reg) != 1 || reg["p1"] == nil || *reg["p1"].Records != DefaultRecords {
		t.Fatalf("registrar %v", reg)
	}
}
