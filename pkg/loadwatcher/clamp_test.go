package loadwatcher

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/paypal/load-watcher/pkg/watcher"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fakePoller map[string]NodeLoad

func (f fakePoller) Poll(context.Context, time.Time) (map[string]NodeLoad, error) { return f, nil }

// Whatever a pull source returns, the store serves utilisation in [0,100] %, and every value
// that had to be changed or dropped is counted.
func TestPollClampsOutOfRange(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name       string
		in         []float64
		want       []float64
		outOfRange float64
	}{
		{"in range untouched", []float64{0, 42.5, 100}, []float64{0, 42.5, 100}, 0},
		{"negative to 0, over 100 to 100", []float64{-13, -1_499_938, 250}, []float64{0, 0, 100}, 3},
		{"not finite dropped", []float64{math.NaN(), 30, math.Inf(1), math.Inf(-1)}, []float64{30}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ms []watcher.Metric
			for _, v := range tc.in {
				ms = append(ms, watcher.Metric{Type: watcher.CPU, Operator: watcher.Average, Value: v})
			}
			s := NewServer(NewStore(SourcePrometheus, time.Minute))
			if err := s.PollOnce(context.Background(), fakePoller{"n": {Updated: now, Metrics: map[string][]watcher.Metric{"15m": ms}}}); err != nil {
				t.Fatal(err)
			}
			l, _ := s.Store.Get("n")
			var got []float64
			for _, m := range l.Metrics["15m"] {
				got = append(got, m.Value)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("stored %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("stored %v, want %v", got, tc.want)
				}
			}
			if c := testutil.ToFloat64(s.outOfRange.WithLabelValues(SourcePrometheus)); c != tc.outOfRange {
				t.Fatalf("counted %v out-of-range values, want %v", c, tc.outOfRange)
			}
		})
	}
}
