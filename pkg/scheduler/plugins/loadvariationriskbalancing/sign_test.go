package loadvariationriskbalancing

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
	"github.com/berth-sched/berth/pkg/scheduler/signtest"
)

// TestSignPod: pods with the same CPU and memory requests share a signature; a different
// request of either resource never does.
func TestSignPod(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	w.Set(lat.CPUDoc(time.Now(), map[string]float64{"n": 10}))
	pl := newPlugin(t, w, "", time.Now)

	sig := func(p *v1.Pod) string { t.Helper(); return signtest.Signature(t, pl, SignerName, p) }
	for _, tc := range []struct {
		name string
		a, b *v1.Pod
		same bool
	}{
		{"same requests, other pod", podWith("a", 100, 1<<20), podWith("b", 100, 1<<20), true},
		{"other CPU", podWith("a", 100, 1<<20), podWith("c", 200, 1<<20), false},
		{"other memory", podWith("a", 100, 1<<20), podWith("d", 100, 2<<20), false},
		{"no requests", podWith("a", 0, 0), podWith("e", 0, 0), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sig(tc.a) == sig(tc.b); got != tc.same {
				t.Fatalf("signatures %s and %s: same = %v, want %v", sig(tc.a), sig(tc.b), got, tc.same)
			}
		})
	}
}
