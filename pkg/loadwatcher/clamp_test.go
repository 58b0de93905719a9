package loadwatcher

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fakePoller map[string]NodeLoad

func (f fakePoller) Poll(context.Context, time.Time) (map[string]NodeLoad, error) { return f, nil }

// Whatever a pull source returns, the store serves utilisation in [0,100] %, and every value
// that had to be changed or dropped is counted.
func TestPollClampsOutOfRange(t *testing.T) {
	now := time.Now()
	const all = HasLatest | HasAvg | HasStd
	tests := []struct {
		name       string
		in, want   Usage
		outOfRange float64
	}{
		{"in range untouched", Usage{Latest: 0, Avg: 42.5, Std: 100, Has: all}, Usage{Latest: 0, Avg: 42.5, Std: 100, Has: all}, 0},
		{"negative to 0, over 100 to 100", Usage{Latest: -13, Avg: -1_499_938, Std: 250, Has: all}, Usage{Latest: 0, Avg: 0, Std: 100, Has: all}, 3},
		{"not finite dropped", Usage{Latest: math.NaN(), Avg: 30, Std: math.Inf(1), Has: all}, Usage{Avg: 30, Has: HasAvg}, 2},
		{"unmeasured left alone", Usage{Avg: 30, Std: 500, Has: HasAvg}, Usage{Avg: 30, Std: 500, Has: HasAvg}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(NewStore(SourcePrometheus, time.Minute))
			in := NodeLoad{Updated: now, Windows: map[string]WindowLoad{"15m": {CPU: tc.in}}}
			if err := s.PollOnce(context.Background(), fakePoller{"n": in}); err != nil {
				t.Fatal(err)
			}
			l, _ := s.Store.Get("n")
			if got := l.Windows["15m"].CPU; got != tc.want {
				t.Fatalf("stored %+v, want %+v", got, tc.want)
			}
			if c := testutil.ToFloat64(s.outOfRange.WithLabelValues(SourcePrometheus)); c != tc.outOfRange {
				t.Fatalf("counted %v out-of-range values, want %v", c, tc.outOfRange)
			}
			// What is served is what was stored: no value outside [0,100] reaches a client.
			b := s.Store.Build(Query{}, now)
			for _, m := range b.Data.NodeMetricsMap["n"].Metrics {
				if !(m.Value >= 0 && m.Value <= 100) {
					t.Fatalf("served %+v", m)
				}
			}
		})
	}
}
