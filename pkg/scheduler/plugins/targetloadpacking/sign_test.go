package targetloadpacking

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	lat "github.com/berth-sched/berth/pkg/scheduler/plugins/loadaware/loadawaretest"
	"github.com/berth-sched/berth/pkg/scheduler/signtest"
)

// TestSignPod: pods predicting the same CPU share a signature (so the framework may reuse a
// ranking across them), whatever their names or how the CPU is spread over containers; a
// different prediction never does. The default multiplier is 1.5.
func TestSignPod(t *testing.T) {
	w := lat.NewWatcher()
	defer w.Close()
	clk := &clock{t: time.Now()}
	w.Set(lat.CPUDoc(clk.Now(), map[string]float64{"n": 10}))
	pl := newPlugin(t, w, "", clk)

	withLimit := func(name, limit string) *v1.Pod {
		p := lat.Pod(name, 0)
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(limit)}
		return p
	}
	sig := func(p *v1.Pod) string { t.Helper(); return signtest.Signature(t, pl, SignerName, p) }
	for _, tc := range []struct {
		name string
		a, b *v1.Pod
		same bool
	}{
		{"same request, other pod", lat.Pod("a", 100), lat.Pod("b", 100), true},
		{"request split over two containers", lat.Pod("a", 100), lat.Pod("c", 50, 50), true},
		{"limit equal to the scaled request", lat.Pod("a", 100), withLimit("d", "150m"), true},
		{"limit equal to the unscaled request", lat.Pod("a", 100), withLimit("e", "100m"), false},
		{"other request", lat.Pod("a", 100), lat.Pod("f", 200), false},
		{"no request (default) vs a small one", lat.Pod("a", 0), lat.Pod("g", 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sig(tc.a) == sig(tc.b); got != tc.same {
				t.Fatalf("signatures %s and %s: same = %v, want %v", sig(tc.a), sig(tc.b), got, tc.same)
			}
		})
	}
}
