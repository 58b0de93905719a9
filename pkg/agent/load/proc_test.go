package load

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    CPUTimes
		wantErr bool
	}{
		{name: "full line, guest excluded from total",
			in:   "cpu  100 10 50 800 40 5 5 0 30 7\ncpu0 1 1 1 1 1 1 1 1 1 1\n",
			want: CPUTimes{Total: 100 + 10 + 50 + 800 + 40 + 5 + 5, Idle: 840, CPUs: 1}},
		{name: "old kernel, four counters",
			in:   "cpu 1 2 3 4\n",
			want: CPUTimes{Total: 10, Idle: 4}},
		{name: "aggregate line after others", in: "intr 5\ncpu0 9 9 9 9 9\ncpu  1 1 1 1 1 1 1 1\ncpu1 1 1 1 1\ncpufreq 1\n",
			want: CPUTimes{Total: 8, Idle: 2, CPUs: 2}},
		{name: "no aggregate line", in: "cpu0 1 2 3 4 5\n", wantErr: true},
		{name: "too few counters", in: "cpu 1 2 3\n", wantErr: true},
		{name: "garbage counter", in: "cpu 1 x 3 4 5\n", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCPUUtilisation(t *testing.T) {
	tests := []struct {
		name      string
		prev, cur CPUTimes
		want      float64
		ok        bool
	}{
		{"quarter busy", CPUTimes{Total: 1000, Idle: 600}, CPUTimes{Total: 2000, Idle: 1350}, 25, true},
		{"all idle", CPUTimes{Total: 1000, Idle: 600}, CPUTimes{Total: 1100, Idle: 700}, 0, true},
		{"all busy", CPUTimes{Total: 1000, Idle: 600}, CPUTimes{Total: 1100, Idle: 600}, 100, true},
		{"no progress", CPUTimes{Total: 1000, Idle: 600}, CPUTimes{Total: 1000, Idle: 600}, 0, false},
		{"counter reset", CPUTimes{Total: 1000, Idle: 600}, CPUTimes{Total: 10, Idle: 5}, 0, false},
		{"idle beyond total", CPUTimes{Total: 1000, Idle: 600}, CPUTimes{Total: 1100, Idle: 800}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := CPUUtilisation(tc.prev, tc.cur)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("got (%v, %v), want (%v, %v)", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParseMeminfo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    float64
		wantErr bool
	}{
		{"40 percent used", "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 600 kB\n", 40, false},
		{"available above total clamps to 0", "MemTotal: 1000 kB\nMemAvailable: 2000 kB\n", 0, false},
		{"no MemAvailable (pre-3.14 kernel)", "MemTotal: 1000 kB\nMemFree: 100 kB\n", 0, true},
		{"zero total", "MemTotal: 0 kB\nMemAvailable: 0 kB\n", 0, true},
		{"bad number", "MemTotal: x kB\nMemAvailable: 1 kB\n", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMeminfo([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && math.Abs(m.Utilisation()-tc.want) > 1e-9 {
				t.Fatalf("utilisation %v, want %v", m.Utilisation(), tc.want)
			}
		})
	}
}

func TestReadFromRoot(t *testing.T) {
	root := t.TempDir()
	if _, err := ReadCPU(root); err == nil {
		t.Fatal("ReadCPU on an empty root succeeded")
	}
	os.WriteFile(filepath.Join(root, "stat"), []byte("cpu 3 0 1 4 0 0 0 0\n"), 0o644)
	os.WriteFile(filepath.Join(root, "meminfo"), []byte("MemTotal: 200 kB\nMemAvailable: 50 kB\n"), 0o644)
	c, err := ReadCPU(root)
	if err != nil || c != (CPUTimes{Total: 8, Idle: 4}) {
		t.Fatalf("ReadCPU = %+v, %v", c, err)
	}
	m, err := ReadMemory(root)
	if err != nil || m.Utilisation() != 75 {
		t.Fatalf("ReadMemory = %+v (%v %%), %v", m, m.Utilisation(), err)
	}
}
