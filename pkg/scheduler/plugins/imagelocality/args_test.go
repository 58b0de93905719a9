package imagelocality

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestParseArgs(t *testing.T) {
	cases := []struct {
		name        string
		in          runtime.Object
		err         string // substring; "" = valid
		window      time.Duration
		status, tie bool
	}{
		{name: "nil gives defaults", in: nil, window: 5 * time.Minute, status: true, tie: true},
		{name: "empty object", in: &runtime.Unknown{Raw: []byte("{}"), ContentType: runtime.ContentTypeJSON}, window: 5 * time.Minute, status: true, tie: true},
		{name: "yaml all fields", in: &runtime.Unknown{Raw: []byte("assumePulledFor: 90s\nuseNodeStatus: false\ntieBreakSmallImages: false\n"), ContentType: runtime.ContentTypeYAML},
			window: 90 * time.Second},
		{name: "zero window turns pulls off", in: &runtime.Unknown{Raw: []byte(`{"assumePulledFor":"0s"}`)}, window: 0, status: true, tie: true},
		{name: "typed args", in: &Args{AssumePulledFor: durationPtr(time.Hour)}, window: time.Hour, status: true, tie: true},
		{name: "negative window", in: &runtime.Unknown{Raw: []byte(`{"assumePulledFor":"-1s"}`)}, err: "assumePulledFor: Invalid value"},
		{name: "window too long", in: &Args{AssumePulledFor: durationPtr(2 * time.Hour)}, err: "assumePulledFor: Invalid value: \"2h0m0s\": must be between 0 (off) and 1h0m0s"},
		{name: "not a duration", in: &runtime.Unknown{Raw: []byte(`{"assumePulledFor":"soon"}`)}, err: "assumePulledFor: Invalid value: \"soon\""},
		{name: "wrong type", in: &runtime.Unknown{Raw: []byte(`{"useNodeStatus":"yes"}`)}, err: "useNodeStatus: Invalid value"},
		{name: "unknown field", in: &runtime.Unknown{Raw: []byte(`{"weight":3}`)}, err: "weight: Unsupported value"},
		{name: "case-mismatched field", in: &runtime.Unknown{Raw: []byte(`{"AssumePulledFor":"1m"}`)}, err: "AssumePulledFor: Unsupported value"},
		{name: "foreign type", in: &runtime.Unknown{Raw: []byte(`{}`), ContentType: "application/vnd.kubernetes.protobuf"}, err: "unsupported content type"},
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
			if a.AssumePulledFor.Duration != tc.window || *a.UseNodeStatus != tc.status || *a.TieBreakSmallImages != tc.tie {
				t.Fatalf("got window %s status %v tie %v, want %s %v %v", a.AssumePulledFor.Duration, *a.UseNodeStatus, *a.TieBreakSmallImages, tc.window, tc.status, tc.tie)
			}
		})
	}
}

// TestParseArgsDoesNotAlias: defaulting typed args must not write into the caller's object.
func TestParseArgsDoesNotAlias(t *testing.T) {
	in := &Args{}
	if _, err := ParseArgs(in); err != nil {
		t.Fatal(err)
	}
	if in.AssumePulledFor != nil || in.UseNodeStatus != nil {
		t.Fatalf("caller's args were defaulted in place: %+v", in)
	}
}
