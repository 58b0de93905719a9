package load

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		{name: "v2 under a kubelet --cgroup-root (another kubelet's pods beside it)",
			files: map[string]string{"cgroup.controllers": "", "berth-a-1/kubepods/burstable/podother/cpu.stat": "usage_usec 1\n",
				"berth-a-2/" + v2 + "cpu.stat": "usage_usec 3\n", "berth-a-2/" + v2 + "memory.current": "4\n"},
			pod: PodRef{UID: uid}, want: PodCounters{CPUNanos: 3000, MemoryBytes: 4}},
		{name: "v2 systemd driver two slices down",
			files: map[string]string{"cgroup.controllers": "", "a.slice/b.slice/kubepods.slice/kubepods-pod" + sd + ".slice/cpu.stat": "usage_usec 2\n",
				"a.slice/b.slice/kubepods.slice/kubepods-pod" + sd + ".slice/memory.current": "9\n"},
			pod: PodRef{UID: uid, QOS: "Guaranteed"}, want: PodCounters{CPUNanos: 2000, MemoryBytes: 9}},
		{name: "v1 under a kubelet --cgroup-root in each controller",
			files: map[string]string{"cpuacct/berth-x/" + strings.TrimPrefix(v1cpu, "cpuacct/") + "cpuacct.usage": "11\n",
				"memory/berth-x/" + strings.TrimPrefix(v1mem, "memory/") + "memory.usage_in_bytes": "12\n"},
			pod: PodRef{UID: uid, QOS: "BestEffort"}, want: PodCounters{CPUNanos: 11, MemoryBytes: 12}},
		{name: "kubepods deeper than the search goes",
			files: map[string]string{"cgroup.controllers": "", "a/b/c/" + v2 + "cpu.stat": "usage_usec 1\n", "a/b/c/" + v2 + "memory.current": "1\n"},
			pod:   PodRef{UID: uid}, wantReason: PodGone},
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

// TestCgroupsKubeletRootSearch: a symbolic link is not followed out of the hierarchy, and a
// pod whose kubelet root appears after a miss is found once the rescan interval has passed,
// not on every miss.
func TestCgroupsKubeletRootSearch(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	v2 := "kubepods/burstable/pod" + uid + "/"
	write(t, root, map[string]string{"cgroup.controllers": ""})
	write(t, outside, map[string]string{v2 + "cpu.stat": "usage_usec 1\n", v2 + "memory.current": "1\n"})
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	c := NewCgroups(root)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	var pe *PodError
	if _, err := c.Read(PodRef{UID: uid}); !errors.As(err, &pe) || pe.Reason != PodGone {
		t.Fatalf("read through a symbolic link: %v, want gone", err)
	}
	write(t, root, map[string]string{"late/" + v2 + "cpu.stat": "usage_usec 5\n", "late/" + v2 + "memory.current": "6\n"})
	now = now.Add(kubeletRootRescanIn / 2)
	if _, err := c.Read(PodRef{UID: uid}); !errors.As(err, &pe) || pe.Reason != PodGone {
		t.Fatalf("searched again before the interval: %v", err)
	}
	now = now.Add(kubeletRootRescanIn)
	got, err := c.Read(PodRef{UID: uid})
	if err != nil || got != (PodCounters{CPUNanos: 5000, MemoryBytes: 6}) {
		t.Fatalf("after the interval: %+v, %v", got, err)
	}
}
