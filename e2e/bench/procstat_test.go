package bench

import (
	"os"
	"testing"
	"time"
)

// The figures come from the kernel for a real process: this one, after it burnt some CPU and
// touched some memory.
func TestProcessCPUAndPeakRSS(t *testing.T) {
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	x := 0
	for time.Since(start) < 300*time.Millisecond {
		x++
	}
	cpu, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if cpu < 200*time.Millisecond {
		t.Errorf("CPU %s after a 300 ms busy loop", cpu)
	}
	rss, err := PeakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss < 64<<20 {
		t.Errorf("peak RSS %d bytes after touching 64 MiB", rss)
	}
	if _, err := ProcessCPU(-1); err == nil {
		t.Error("no error for a process that cannot exist")
	}
	_ = buf[x%len(buf)]
}
