package bench

import (
	"strings"
	"testing"
)

func TestHintUsed(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       int
		err        bool
	}{
		{"two profiles", `# HELP scheduler_batch_attempts_total Counts
scheduler_batch_attempts_total{profile="a",result="hint_used"} 1990
scheduler_batch_attempts_total{profile="a",result="no_hint"} 10
scheduler_batch_attempts_total{profile="b",result="hint_used"} 5
scheduler_batch_cache_flushed_total{profile="a",reason="expired"} 3
`, 1995, false},
		{"never batched", "scheduler_batch_attempts_total{profile=\"a\",result=\"no_hint\"} 2000\n", 0, false},
		{"garbage value", "scheduler_batch_attempts_total{profile=\"a\",result=\"hint_used\"} x\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hintUsed(strings.NewReader(tc.text))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("hintUsed = %d, %v; want %d (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}
