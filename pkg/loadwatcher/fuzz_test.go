package loadwatcher

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeReport feeds arbitrary bodies to what the watcher runs on a POST /watcher after
// authentication (DecodeReport, then ValidateReport): never a panic; an accepted report has a
// bounded node name, known windows and percentages only, turns into metrics in [0,100], and
// survives an encode/decode round trip.
func FuzzDecodeReport(f *testing.F) {
	now := time.Unix(1_700_000_000, 0)
	good, _ := json.Marshal(validReport())
	f.Add(good)
	f.Add([]byte(`{"node":"n","time":1700000000,"latest":{"cpu":1e308,"memory":-0},"windows":[{"window":"5m","samples":1}],"podUIDs":[""]}`))
	f.Add([]byte(`{"node":"n","time":9223372036854775807,"windows":[],"instance":"x","seq":0}`))
	f.Add(append(append([]byte{}, good...), "}"...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeReport(bytes.NewReader(data))
		if err != nil {
			return
		}
		if ValidateReport(r, now, Limits{}) != nil {
			return
		}
		if len(r.Node) == 0 || len(r.Node) > 253 || len(r.PodUIDs) > DefaultMaxPodUIDs || len(r.Windows) == 0 || len(r.Windows) > len(WindowNames) {
			t.Fatalf("accepted report out of bounds: %+v", r)
		}
		for w, wl := range WindowsFromReport(r) {
			for _, v := range []float64{wl.CPU.Latest, wl.CPU.Avg, wl.CPU.Std, wl.Memory.Latest, wl.Memory.Avg, wl.Memory.Std} {
				if !(v >= 0 && v <= 100) {
					t.Fatalf("window %s: %+v out of [0,100]", w, wl)
				}
			}
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("accepted report does not encode: %v", err)
		}
		back, err := DecodeReport(bytes.NewReader(enc))
		if err != nil || !reflect.DeepEqual(normalise(r), normalise(back)) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, r, back)
		}
	})
}

// normalise makes nil and empty pod lists equal (JSON cannot tell them apart after null).
func normalise(r *Report) Report {
	c := *r
	if len(c.PodUIDs) == 0 {
		c.PodUIDs = nil
	}
	return c
}
