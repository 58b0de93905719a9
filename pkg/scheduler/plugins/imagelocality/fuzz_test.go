package imagelocality

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/berth-sched/berth/pkg/scheduler/apis/config/configtest"
)

// FuzzNodeImageLocalityArgs: ParseArgs on arbitrary JSON or YAML never panics, and accepted
// args survive an encode/parse round trip unchanged.
func FuzzNodeImageLocalityArgs(f *testing.F) {
	f.Add([]byte(`{"assumePulledFor":"5m","useNodeStatus":true,"tieBreakSmallImages":false}`), false)
	f.Add([]byte("assumePulledFor: 0s\n"), true)
	f.Add([]byte(`{"assumePulledFor":"-3h"}`), false)
	f.Fuzz(func(t *testing.T, data []byte, yaml bool) {
		configtest.RoundTrip(t, ParseArgs, data, yaml, nil, func(a, b *Args) bool { return reflect.DeepEqual(a, b) })
	})
}

// FuzzParseNodeImages: any JSON document as a NodeImages object parses without panicking,
// every key it yields is a normalised name the pod side can produce, and no size escapes
// [0, 1 TiB].
func FuzzParseNodeImages(f *testing.F) {
	f.Add([]byte(`{"spec":{"nodeName":"n","images":[{"id":"sha256:` + "4c0fdaa8b6341bfdeca5f18f7837462c80cff90527ee35ef185571e1c327beac" + `","tags":["docker.io/library/nginx:1.16"],"digests":["docker.io/library/nginx@sha256:4c0fdaa8b6341bfdeca5f18f7837462c80cff90527ee35ef185571e1c327beac"],"sizeBytes":1000}]}}`))
	f.Add([]byte(`{"spec":{"images":[{"tags":["Nginx"],"sizeBytes":-1},"x",{"tags":"y","sizeBytes":1e300}]}}`))
	f.Add([]byte(`{"spec":"garbage"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var obj map[string]any
		if err := json.Unmarshal(data, &obj); err != nil {
			return
		}
		inv, _ := parseNodeImages(obj, newNameCache())
		for k, size := range inv {
			if size < 0 || size > maxImageSize {
				t.Fatalf("size %d for %q out of range", size, k)
			}
			if _, ok := imageID(k); ok {
				continue
			}
			if again, ok := keyOf(k); !ok || again != k {
				t.Fatalf("inventory key %q does not normalise to itself (%q, %v)", k, again, ok)
			}
		}
	})
}
