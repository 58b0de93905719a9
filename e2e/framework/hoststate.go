package framework

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
)

// HostState is what a local cluster's real node must not change in the machine's root
// namespace.
type HostState struct {
	// IPTables is iptables-save without comments (timestamps) and with counters blanked
	// (they change with traffic): the rules only.
	IPTables string
	Links    []string
	Sysctls  map[string]string
	// Files lists the host paths the kubelet and containerd write regardless of their
	// configuration (device-plugin socket, log links, CNI cache, shim sockets).
	Files []string
}

var countersRe = regexp.MustCompile(`\[\d+:\d+\]`)

// ReadHostStateAlone is ReadHostState while no real node runs: another run's node (a
// developer's suite beside CI's) changes the same paths and kernel settings, and its teardown
// restores them.
func ReadHostStateAlone(t *testing.T) HostState {
	t.Helper()
	var s HostState
	if err := cluster.WhileNoRealNode(10*time.Minute, func() { s = ReadHostState(t) }); err != nil {
		t.Fatal(err)
	}
	return s
}

// ReadHostState reads the root namespace's rules, links, kernel settings and host paths. A real
// node run elsewhere on the machine changes them too: callers that compare across their own
// run hold cluster.WhileNoRealNode or own the only node.
func ReadHostState(t *testing.T) HostState {
	t.Helper()
	var s HostState
	save := NeedHostTool(t, "iptables-save", "iptables")
	out, err := exec.Command(save).CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, countersRe.ReplaceAllString(l, "[]"))
	}
	s.IPTables = strings.Join(lines, "\n")
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		s.Links = append(s.Links, i.Name)
	}
	sort.Strings(s.Links)
	for _, d := range []string{"/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/log/containers",
		"/var/lib/cni", "/var/lib/cni/results", "/run/containerd", "/run/containerd/s"} {
		if _, err := os.Lstat(d); err != nil {
			continue
		}
		s.Files = append(s.Files, d)
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			s.Files = append(s.Files, filepath.Join(d, e.Name()))
		}
	}
	s.Sysctls = map[string]string{}
	for _, k := range []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"} {
		b, _ := os.ReadFile("/proc/sys/" + k)
		s.Sysctls[k] = strings.TrimSpace(string(b))
	}
	return s
}

// SameNamespace reports whether the root namespace's iptables rules and links are as in before.
func (after HostState) SameNamespace(before HostState) bool {
	return after.IPTables == before.IPTables && strings.Join(after.Links, ",") == strings.Join(before.Links, ",")
}

// CheckUnchanged fails t for each way after differs from before.
func (after HostState) CheckUnchanged(t *testing.T, before HostState) {
	t.Helper()
	if after.IPTables != before.IPTables {
		t.Errorf("root namespace iptables changed:\nbefore:\n%s\nafter:\n%s", before.IPTables, after.IPTables)
	}
	if strings.Join(after.Links, ",") != strings.Join(before.Links, ",") {
		t.Errorf("root namespace links changed: before %v, after %v", before.Links, after.Links)
	}
	if strings.Join(after.Files, ",") != strings.Join(before.Files, ",") {
		t.Errorf("host paths changed: before %v, after %v", before.Files, after.Files)
	}
	for k, v := range before.Sysctls {
		if after.Sysctls[k] != v {
			t.Errorf("sysctl %s: %s before, %s after", k, v, after.Sysctls[k])
		}
	}
}
