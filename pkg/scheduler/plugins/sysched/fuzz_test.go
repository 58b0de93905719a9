package sysched

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzSySchedArgs: ParseArgs on arbitrary JSON or YAML never panics, and accepted args survive
// an encode/parse round trip unchanged.
func FuzzSySchedArgs(f *testing.F) {
	f.Add([]byte(`{"defaultProfileNamespace":"default","defaultProfileName":"all-syscalls"}`), false)
	f.Add([]byte("syschedCRDNamespace: ns\nsyschedFullCRDName: full\n"), true)
	f.Add([]byte(`{"defaultProfileName":"a","syschedFullCRDName":"b"}`), false)
	f.Fuzz(func(t *testing.T, data []byte, yaml bool) {
		ct := runtime.ContentTypeJSON
		if yaml {
			ct = runtime.ContentTypeYAML
		}
		a, err := ParseArgs(&runtime.Unknown{Raw: data, ContentType: ct})
		if err != nil {
			return
		}
		enc, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("accepted args do not encode: %v", err)
		}
		b, err := ParseArgs(&runtime.Unknown{Raw: enc, ContentType: runtime.ContentTypeJSON})
		if err != nil {
			t.Fatalf("accepted args refused after a round trip: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the args: %+v → %+v", a, b)
		}
	})
}
