package targetloadpacking

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzTargetLoadPackingArgs feeds arbitrary JSON or YAML to ParseArgs (what the scheduler and
// the operator run on a user's configuration): it must never panic, what it accepts must be in
// range, and accepted args must survive an encode/parse round trip unchanged.
func FuzzTargetLoadPackingArgs(f *testing.F) {
	f.Add([]byte(`{"watcherAddress":"http://w:2020","targetUtilization":60,"defaultRequests":{"cpu":"500m"},"defaultRequestsMultiplier":"2"}`), false)
	f.Add([]byte("watcherAddress: http://w:2020\nusageThresholds: {cpu: 80}\nexpiredMetricsAction: Block\n"), true)
	f.Add([]byte(`{"watcherAddress":"http://w","defaultRequestsMultiplier":"NaN","targetUtilization":-1}`), false)
	f.Fuzz(func(t *testing.T, data []byte, yaml bool) {
		ct := runtime.ContentTypeJSON
		if yaml {
			ct = runtime.ContentTypeYAML
		}
		a, err := ParseArgs(&runtime.Unknown{Raw: data, ContentType: ct})
		if err != nil {
			return
		}
		if u := *a.TargetUtilization; u < 1 || u > 100 {
			t.Fatalf("accepted targetUtilization %d", u)
		}
		if m, err := parseMultiplier(*a.DefaultRequestsMultiplier); err != nil || m <= 0 {
			t.Fatalf("accepted multiplier %q: %v", *a.DefaultRequestsMultiplier, err)
		}
		if *a.NeutralScore < 0 || *a.NeutralScore > 100 {
			t.Fatalf("accepted neutralScore %d", *a.NeutralScore)
		}
		enc, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("accepted args do not encode: %v", err)
		}
		b, err := ParseArgs(&runtime.Unknown{Raw: enc, ContentType: runtime.ContentTypeJSON})
		if err != nil {
			t.Fatalf("accepted args refused after a round trip: %v\n%s", err, enc)
		}
		if enc2, _ := json.Marshal(b); !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the args:\n%s\n%s", enc, enc2)
		}
	})
}
