// Package configtest holds the body every plugin's args fuzz target shares. Only tests
// import it.
package configtest

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// RoundTrip feeds data (YAML when yaml, else JSON) to parse, as the scheduler and the operator
// do with a user's configuration: it must not panic; args it refuses end the case. Accepted
// args must pass check (nil: none), encode to JSON, be accepted again from that JSON and encode
// to the same bytes; with equal (nil: none) the two parsed values must also be equal by it.
func RoundTrip[A any](t *testing.T, parse func(runtime.Object) (A, error), data []byte, yaml bool,
	check func(*testing.T, A), equal func(a, b A) bool) {
	t.Helper()
	ct := runtime.ContentTypeJSON
	if yaml {
		ct = runtime.ContentTypeYAML
	}
	a, err := parse(&runtime.Unknown{Raw: data, ContentType: ct})
	if err != nil {
		return
	}
	if check != nil {
		check(t, a)
	}
	enc, err := json.Marshal(a)
	if err != nil {
		t.Fatalf("accepted args do not encode: %v", err)
	}
	b, err := parse(&runtime.Unknown{Raw: enc, ContentType: runtime.ContentTypeJSON})
	if err != nil {
		t.Fatalf("accepted args refused after a round trip: %v\n%s", err, enc)
	}
	if enc2, _ := json.Marshal(b); !bytes.Equal(enc, enc2) {
		t.Fatalf("round trip changed the args:\n%s\n%s", enc, enc2)
	}
	if equal != nil && !equal(a, b) {
		t.Fatalf("round trip changed the args: %+v → %+v", a, b)
	}
}
