package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-sched/berth/e2e/cluster"
)

// Leftovers names what a stopped local cluster (or `berth-local down`) must no longer have on
// the machine.
type Leftovers struct {
	// Stop names the step in messages ("Stop", "down").
	Stop string
	// PIDs are the processes it ran.
	PIDs []int
	// Dir is its directory, DirName what messages call it ("cluster dir", "state dir"): no
	// process may name it and nothing may be mounted under it.
	Dir, DirName string
	// NetNS holds its nodes' network namespaces (HoldNetNS, taken before the stop): no process
	// may be left in one. CheckLeftovers releases it.
	NetNS *NetNSHold
	// Cgroups are its nodes' cgroup names, relative to each cgroup mount.
	Cgroups []string
}

// CheckLeftovers reports every process, mount, namespace member and cgroup of l still there.
func CheckLeftovers(t testing.TB, l Leftovers) {
	t.Helper()
	for _, pid := range l.PIDs {
		if Alive(pid) {
			t.Errorf("process %d survived %s: %s", pid, l.Stop, Cmdline(pid))
		}
	}
	for _, pid := range cluster.PIDsWithArg(l.Dir) {
		t.Errorf("process %d still names the %s: %s", pid, l.DirName, Cmdline(pid))
	}
	if ms, err := cluster.MountsUnder(l.Dir); err != nil || len(ms) > 0 {
		t.Errorf("mounts left under %s: %v %v", l.Dir, ms, err)
	}
	if l.NetNS != nil {
		for _, inode := range l.NetNS.inodes {
			for _, pid := range PIDsInNetNS(inode) {
				t.Errorf("process %d is still in a node's network namespace: %s", pid, Cmdline(pid))
			}
		}
		l.NetNS.Release()
	}
	if len(l.Cgroups) == 0 {
		return
	}
	cms, err := cluster.CgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cms {
		for _, cg := range l.Cgroups {
			if _, err := os.Stat(filepath.Join(m.Point, cg)); err == nil {
				t.Errorf("cgroup %s left behind", filepath.Join(m.Point, cg))
			}
		}
	}
}

// Alive reports whether pid runs: it exists and is not a zombie waiting for its parent.
func Alive(pid int) bool { return syscall.Kill(pid, 0) == nil && !zombie(pid) }

// Cmdline is pid's command line, arguments separated by spaces ("" once it is gone).
func Cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

func zombie(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}

// PIDs lists the processes for which keep holds.
func PIDs(keep func(pid int, proc string) bool) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if keep(pid, filepath.Join("/proc", e.Name())) {
			out = append(out, pid)
		}
	}
	return out
}

// NetNSHold keeps network namespaces alive across a stop. why: the kernel hands a freed
// namespace's inode number to the next namespace made, so once a node's namespace is gone, a
// suite running beside this one (its Karpenter's own namespace, its nodes') can own the same
// number, and its processes would read as this cluster's leftovers. Held open, the namespace
// keeps its number, and only what is really in it is counted.
type NetNSHold struct {
	inodes []uint64
	files  []*os.File
}

// HoldNetNS opens each namespace (by inode) through a process in it now, so take it before the
// stop, while the nodes run. A namespace with no process in it fails the test: there would be
// nothing to check.
func HoldNetNS(t testing.TB, inodes ...uint64) *NetNSHold {
	t.Helper()
	h := &NetNSHold{}
	t.Cleanup(h.Release)
	for _, inode := range inodes {
		f, err := openNetNS(inode)
		if err != nil {
			t.Fatalf("holding network namespace %d: %v", inode, err)
		}
		h.inodes = append(h.inodes, inode)
		h.files = append(h.files, f)
	}
	return h
}

// openNetNS opens the namespace with this inode through the first process found in it that
// is still there when opened.
func openNetNS(inode uint64) (*os.File, error) {
	for _, pid := range PIDsInNetNS(inode) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		// why fstat: the process may have gone (and its pid been reused) between the listing
		// and the open; what counts is the namespace the descriptor holds.
		if err := syscall.Fstat(int(f.Fd()), &st); err == nil && st.Ino == inode {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("no process is in it")
}

// Release lets the namespaces go (the kernel frees each with its last reference). Safe to call
// more than once.
func (h *NetNSHold) Release() {
	for _, f := range h.files {
		f.Close()
	}
	h.files = nil
}

// PIDsInNetNS lists the processes in the network namespace with this inode.
func PIDsInNetNS(inode uint64) []int {
	want := fmt.Sprintf("net:[%d]", inode)
	return PIDs(func(_ int, proc string) bool {
		l, err := os.Readlink(filepath.Join(proc, "ns", "net"))
		return err == nil && l == want
	})
}
