package agentres

import (
	"os"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, stat string
		want       int64
		wantErr    bool
	}{
		{"plain", "42 (berth-agent) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 8 0 100 0 0", 10, false},
		{"name with spaces and parens", "42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1 0 0", 300, false},
		{"truncated", "42 (x) S 1 2", 0, true},
		{"no command", "garbage", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCPUTicks(tc.stat)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ParseCPUTicks = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := ParseVmRSS("Name:\tx\nVmRSS:\t  12 MB\n"); err == nil {
		t.Error("VmRSS in MB accepted")
	}
	if v, err := ParseVmRSS("Name:\tx\nVmRSS:\t  1234 kB\n"); err != nil || v != 1234 {
		t.Errorf("ParseVmRSS = %d, %v", v, err)
	}
	// The parsers agree with the kernel about this very process.
	s, err := Read(os.Getpid())
	if err != nil || s.RSSKiB <= 0 || s.CPUTicks < 0 {
		t.Errorf("Read(self) = %+v, %v", s, err)
	}
}

func TestSummarize(t *testing.T) {
	r := &Result{Samples: []Sample{{At: 0, RSSKiB: 10, CPUTicks: 100}, {At: time.Second, RSSKiB: 20, CPUTicks: 102}, {At: 2 * time.Second, RSSKiB: 30, CPUTicks: 110}}}
	s, err := Summarize(r)
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSMinKiB != 10 || s.RSSMaxKiB != 30 || s.RSSAvgKiB != 20 || s.CPUSeconds != 0.1 || s.CPUPercent != 5 || s.CPUPercentMaxInterval != 8 {
		t.Errorf("Summarize = %+v", s)
	}
	if _, err := Summarize(&Result{Samples: r.Samples[:1]}); err == nil {
		t.Error("one sample summarised")
	}
}
