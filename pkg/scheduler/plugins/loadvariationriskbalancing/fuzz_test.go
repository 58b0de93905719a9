package loadvariationriskbalancing

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzLoadVariationRiskBalancingArgs: ParseArgs on arbitrary JSON or YAML never panics, accepts
// only finite non-negative margin and sensitivity, and accepted args survive a round trip.
func FuzzLoadVariationRiskBalancingArgs(f *testing.F) {
	f.Add([]byte(`{"watcherAddress":"http://w:2020","safeVarianceMargin":1.5,"safeVarianceSensitivity":0}`), false)
	f.Add([]byte("watcherAddress: http://w:2020\nsafeVarianceMargin: .inf\n"), true)
	f.Add([]byte(`{"watcherAddress":"http://w","safeVarianceMargin":-1,"metricsExpirySeconds":0}`), false)
	f.Fuzz(func(t *testing.T, data []byte, yaml bool) {
		ct := runtime.ContentTypeJSON
		if yaml {
			ct = runtime.ContentTypeYAML
		}
		a, err := ParseArgs(&runtime.Unknown{Raw: data, ContentType: ct})
		if err != nil {
			return
		}
		for _, v := range []float64{*a.SafeVarianceMargin, *a.SafeVarianceSensitivity} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("accepted %v", v)
			}
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
