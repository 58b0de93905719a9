package profiles

import (
	"encoding/json"
	"testing"
)

// FuzzParseBinding feeds arbitrary JSON objects to ParseBinding: never a panic; a binding it
// returns names its image and profile, and it refuses (with an error) only SeccompProfile
// bindings lacking them.
func FuzzParseBinding(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"b","namespace":"ns"},"spec":{"image":"nginx:1","profileRef":{"kind":"SeccompProfile","name":"p"}}}`))
	f.Add([]byte(`{"metadata":{"name":"b"},"spec":{"image":"*","profileRef":{"kind":"SelinuxProfile","name":"p"}}}`))
	f.Add([]byte(`{"metadata":[],"spec":{"profileRef":{"kind":"SeccompProfile","name":7}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var obj map[string]interface{}
		if json.Unmarshal(data, &obj) != nil {
			return
		}
		b, err := ParseBinding(obj)
		switch {
		case b != nil && err != nil:
			t.Fatalf("binding and error: %+v %v", b, err)
		case b != nil && (b.Name == "" || b.Image == "" || b.ProfileName == ""):
			t.Fatalf("incomplete binding accepted: %+v", b)
		}
	})
}
