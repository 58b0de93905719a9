package load

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const uid = "0d3c0e3a-9c7b-4a57-8a1e-3c3f5b2a9d10"

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCgroupsRead(t *testing.T) {
	sd := strings.ReplaceAll(uid, "-", "_")
	v2 := "kubepods/burstable/pod" + uid + "/"
	v1cpu := "cpuacct/kubepods/besteffort/pod" + uid + "/"
	v1mem := "memory/kubepods/besteffort/pod" + uid + "/"
	tests := []struct {
		name       string
		files      map[string]string
		pod        PodRef
		want       PodCounters
		wantReason string
	}{
		{name: "v2 cgroupfs, inactive file taken off",
			files: map[string]string{"cgroup.controllers": "cpu memory\n", v2 + "cpu.stat": "usage_usec 1500\nuser_usec 1000\n",
				v2 + "memory.current": "10000\n", v2 + "memory.stat": "anon 8000\ninactive_file 3000\n"},
			pod: PodRef{UID: uid, QOS: "Burstable"}, want: PodCounters{CPUNanos: 1500000, MemoryBytes: 7000}},
		{name: "v2 unknown class is searched",
			files: map[string]string{"cgroup.controllers": "", v2 + "cpu.stat": "usage_usec 7\n", v2 + "memory.current": "5\n"},
			pod:   PodRef{UID: uid}, want: PodCounters{CPUNanos: 7000, MemoryBytes: 5}},
		{name: "v2 systemd driver, guaranteed",
			files: map[string]string{"cgroup.controllers": "", "kubepods.slice/kubepods-pod" + sd + ".slice/cpu.stat": "usage_usec 2\n",
				"kubepods.slice/kubepods-pod" + sd + ".slice/memory.current": "9\n"},
			pod: PodRef{UID: uid, QOS: "Guaranteed"}, want: PodCounters{CPUNanos: 2000, MemoryBytes: 9}},
		{name: "v1 cgroupfs, total_inactive_file taken off",
			files: map[string]string{v1cpu + "cpuacct.usage": "123456789\n", v1mem + "memory.usage_in_bytes": "4096\n",
				v1mem + "memory.stat": "cache 100\ntotal_inactive_file 96\n"},
			pod: PodRef{UID: uid, QOS: "BestEffort"}, want: PodCounters{CPUNanos: 123456789, MemoryBytes: 4000}},
		{name: "v1 cpu,cpuacct joined controller",
			files: map[string]string{"cpu,cpuacct/kubepods/pod" + uid + "/cpuacct.usage": "5\n",
				"memory/kubepods/pod" + uid + "/memory.usage_in_bytes": "6\n"},
			pod: PodRef{UID: uid, QOS: "Guaranteed"}, want: PodCounters{CPUNanos: 5, MemoryBytes: 6}},
		{name: "inactive above usage gives 0, not a wrap",
			files: map[string]string{v1cpu + "cpuacct.usage": "5\n", v1mem + "memory.usage_in_bytes": "10\n", v1mem + "memory.stat": "total_inactive_file 99\n"},
			pod:   PodRef{UID: uid}, want: PodCounters{CPUNanos: 5}},
		{name: "gone", files: map[string]string{"cgroup.controllers": ""}, pod: PodRef{UID: uid}, wantReason: PodGone},
		{name: "gone mid-read (cpu there, memory not)",
			files: map[string]string{"cgroup.controllers": "", v2 + "cpu.stat": "usage_usec 1\n"}, pod: PodRef{UID: uid}, wantReason: PodGone},
		{name: "garbage counter",
			files: map[string]string{"cgroup.controllers": "", v2 + "cpu.stat": "usage_usec lots\n", v2 + "memory.current": "1\n"},
			pod:   PodRef{UID: uid}, wantReason: PodGarbage},
		{name: "no usage_usec",
			files: map[string]string{"cgroup.controllers": "", v2 + "cpu.stat": "user_usec 1\n", v2 + "memory.current": "1\n"},
			pod:   PodRef{UID: uid}, wantReason: PodGarbage},
		{name: "huge counter overflows nanoseconds",
			files: map[string]string{"cgroup.controllers": "", v2 + "cpu.stat": "usage_usec 18446744073709551615\n", v2 + "memory.current": "1\n"},
			pod:   PodRef{UID: uid}, wantReason: PodGarbage},
		{name: "memory beyond uint64",
			files: map[string]string{v1cpu + "cpuacct.usage": "1\n", v1mem + "memory.usage_in_bytes": "99999999999999999999999\n"},
			pod:   PodRef{UID: uid}, wantReason: PodGarbage},
		{name: "negative",
			files: map[string]string{v1cpu + "cpuacct.usage": "-1\n", v1mem + "memory.usage_in_bytes": "1\n"},
			pod:   PodRef{UID: uid}, wantReason: PodGarbage},
		{name: "oversized file",
			files: map[string]string{"cgroup.controllers": "", v2 + "cpu.stat": strings.Repeat("x", maxCgroupFile+10), v2 + "memory.current": "1\n"},
			pod:   PodRef{UID: uid}, wantReason: PodGarbage},
		{name: "UID that would walk the tree", files: map[string]string{"cgroup.controllers": ""},
			pod: PodRef{UID: "../../etc"}, wantReason: PodGarbage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tc.files)
			got, err := NewCgroups(root).Read(tc.pod)
			if tc.wantReason != "" {
				var pe *PodError
				if !errors.As(err, &pe) || pe.Reason != tc.wantReason {
					t.Fatalf("Read = %+v, %v; want a %s PodError", got, err, tc.wantReason)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Read = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
