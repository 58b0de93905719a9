package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Mount is one line of /proc/self/mountinfo that matters here.
type Mount struct {
	Point  string
	FSType string
	Super  string // super options (the v1 cgroup controllers)
}

// Mounts parses /proc/self/mountinfo.
func Mounts() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		if m, ok := parseMountInfo(s.Text()); ok {
			out = append(out, m)
		}
	}
	return out, s.Err()
}

// parseMountInfo reads "id parent maj:min root point opts [optional...] - fstype source super".
func parseMountInfo(line string) (Mount, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return Mount{}, false
	}
	f, g := strings.Fields(pre), strings.Fields(post)
	if len(f) < 5 || len(g) < 1 {
		return Mount{}, false
	}
	m := Mount{Point: unescapeMount(f[4]), FSType: g[0]}
	if len(g) >= 3 {
		m.Super = g[2]
	}
	return m, true
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MountsUnder lists mount points at or below dir, deepest first.
func MountsUnder(dir string) ([]string, error) {
	ms, err := Mounts()
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	var out []string
	for _, m := range ms {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out, nil
}

// CgroupMounts lists the cgroup hierarchies' mount points (v1 and v2).
func CgroupMounts() ([]Mount, error) {
	ms, err := Mounts()
	if err != nil {
		return nil, err
	}
	var out []Mount
	seen := map[string]bool{}
	for _, m := range ms {
		if (m.FSType == "cgroup" || m.FSType == "cgroup2") && !seen[m.Point] {
			seen[m.Point] = true
			out = append(out, m)
		}
	}
	return out, nil
}

// realNodeCgroups creates the node's cgroup root in every hierarchy (the kubelet refuses a
// cgroupRoot that does not exist) and remembers it for teardown.
func (c *Cluster) realNodeCgroups(r *RealNode) error {
	ms, err := CgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range ms {
		dir := filepath.Join(m.Point, r.CgroupName)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		r.cgroups = append(r.cgroups, dir)
		switch {
		case m.FSType == "cgroup" && hasOpt(m.Super, "cpuset"):
			// A v1 cpuset cgroup takes no task until it has CPUs and memory nodes.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(m.Point, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		case m.FSType == "cgroup2":
			// Hand the parent's controllers down, as a systemd slice would (best effort: a
			// hybrid host's v2 mount has none to give).
			b, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
			for _, ctl := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+ctl), 0o644)
			}
		}
	}
	return nil
}

func hasOpt(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// kernelTunables are the host-wide sysctls the kubelet sets at start (protectKernelDefaults
// would make it fail instead); teardown puts back the values found before.
var kernelTunables = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func readKernelTunables() map[string]string {
	out := map[string]string{}
	for _, k := range kernelTunables {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			out[k] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// realNodeBeforeStop stops the nodes' agents and their pods while containerd still runs, so
// every shim exits cleanly (and removes its socket) before the processes are stopped.
func (c *Cluster) realNodeBeforeStop() {
	rs := c.realNodes()
	if rs == nil {
		return
	}
	var wg sync.WaitGroup
	for _, r := range rs.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.stopNodeAgents(r)
			if socks := c.removeNodeTasks(r); len(socks) > 0 {
				c.mu.Lock()
				rs.shimSockets = append(rs.shimSockets, socks...)
				c.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func (c *Cluster) stopNodeAgents(r *RealNode) {
	for _, p := range []*Process{r.kubeProxy, r.kubelet} {
		if p != nil {
			c.StopComponent(p)
		}
	}
	r.kubeProxy, r.kubelet = nil, nil
}

// removeNodeTasks deletes the node's containers' tasks through its containerd (when it still
// runs) and returns the sockets of the shims that served them.
func (c *Cluster) removeNodeTasks(r *RealNode) []string {
	if r.tools["ctr"] == "" || r.paths.Socket == "" || r.stopped {
		return nil
	}
	if _, err := os.Stat(r.paths.Socket); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	socks := shimSockets(r.paths.Socket)
	// Application containers first, then sandboxes: deleting a sandbox's task ends the shim
	// that also serves its pod's containers.
	for _, kind := range []string{"container", "sandbox"} {
		out, err := r.Ctr(ctx, "containers", "ls", "-q", `labels."io.cri-containerd.kind"==`+kind)
		if err != nil {
			c.cfg.Logf("real node %s: listing %ss: %v", r.NodeName, kind, err)
			return socks
		}
		failed := map[string]error{}
		for _, id := range strings.Fields(out) {
			// -f kills the task first; deleting the last task of a shim makes it exit.
			if _, err := r.Ctr(ctx, "tasks", "rm", "-f", id); err != nil && !strings.Contains(err.Error(), "not found") {
				failed[id] = err
			}
		}
		if len(failed) == 0 {
			continue
		}
		// A shim that exits as its last task goes answers "ttrpc: closed" although the task
		// is gone: only a task that is still listed failed to go.
		left, err := r.Ctr(ctx, "tasks", "ls", "-q")
		if err != nil {
			c.cfg.Logf("real node %s: listing tasks: %v", r.NodeName, err)
			return socks
		}
		for _, id := range strings.Fields(left) {
			if err, ok := failed[id]; ok {
				c.cfg.Logf("real node %s: removing task %s: %v", r.NodeName, id, err)
			}
		}
	}
	return socks
}

// StopRealNode stops one real node as a machine failure would: its kubelet, kube-proxy and
// containerd are killed (no graceful pod shutdown, the API server is not told), then its
// containers and their shims. The node's namespace, links and cgroups stay until the cluster
// stops, so the rest of the cluster runs on; the API server sees the node stop reporting.
func (c *Cluster) StopRealNode(name string) error {
	r := c.RealNodeNamed(name)
	if r == nil {
		return fmt.Errorf("no real node %q", name)
	}
	rs := c.realNodes()
	socks := shimSockets(r.paths.Socket)
	for _, p := range []*Process{r.kubelet, r.kubeProxy, r.containerd} {
		if p != nil {
			c.killComponent(p)
		}
	}
	r.kubelet, r.kubeProxy, r.containerd, r.stopped = nil, nil, nil, true
	// Shims outlive containerd and keep the containers running: a stopped machine runs nothing.
	for attempt := 0; attempt < 50; attempt++ {
		pids := append(cgroupPIDs(r.cgroups), pidsWithArg(r.paths.Socket)...)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.mu.Lock()
	rs.shimSockets = append(rs.shimSockets, socks...)
	c.mu.Unlock()
	if left := cgroupPIDs(r.cgroups); len(left) > 0 {
		return fmt.Errorf("node %s: processes %v survived SIGKILL", name, left)
	}
	return nil
}

// realNodeTeardown runs once every process has stopped: it kills what could have escaped
// (container processes in the nodes' cgroups, shims), unmounts everything under Dir (the
// namespaces' bind mounts among them: the namespaces, their links and iptables rules go with
// their last user), removes the cgroups and the CNI cache, and restores the kernel tunables.
func (c *Cluster) realNodeTeardown() error {
	rs := c.realNodes()
	if rs == nil {
		return nil
	}
	defer func() {
		c.mu.Lock()
		c.real = nil
		c.mu.Unlock()
		if rs.hostLock != nil {
			rs.hostLock.Close() // releases the flock
		}
	}()
	var errs []error
	for _, s := range rs.sockets() {
		rs.shimSockets = append(rs.shimSockets, shimSockets(s)...)
	}
	cgroups := rs.cgroups()
	// Processes first: a live process pins mounts, cgroups and the namespace.
	for attempt := 0; attempt < 50; attempt++ {
		pids := append(cgroupPIDs(cgroups), pidsWithArg(c.Dir)...)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rs.fwd != nil {
		rs.fwd.close()
	}
	for _, n := range rs.nodes {
		if n.ns != nil {
			n.ns.close()
		}
	}
	if err := UnmountUnder(c.Dir); err != nil {
		errs = append(errs, err)
	}
	for _, cg := range cgroups {
		if err := removeCgroupTree(cg); err != nil {
			errs = append(errs, err)
		}
	}
	// libcni caches results in /var/lib/cni whatever the config says; the files carry the
	// network name, which is this cluster's own.
	if len(rs.nodes) > 0 && rs.nodes[0].Network != "" {
		cached, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", rs.nodes[0].Network+"-*"))
		for _, f := range cached {
			_ = os.Remove(f)
		}
	}
	cleanHostPaths(c.Dir, rs.shimSockets, rs.createdHostPaths)
	for k, v := range rs.sysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(b)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s: %w", k, err))
			}
		}
	}
	return errors.Join(errs...)
}

// UnmountUnder lazily unmounts every mount at or below dir, deepest first.
func UnmountUnder(dir string) error {
	var errs []error
	for pass := 0; pass < 3; pass++ {
		ms, err := MountsUnder(dir)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, m := range ms {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("umount %s: %w", m, err))
			}
		}
	}
	if ms, _ := MountsUnder(dir); len(ms) > 0 {
		errs = append(errs, fmt.Errorf("still mounted under %s: %s", dir, strings.Join(ms, ", ")))
	}
	return errors.Join(errs...)
}

// cgroupPIDs lists every process in the cgroup trees.
func cgroupPIDs(roots []string) []int {
	var pids []int
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// pidsWithArg lists processes (other than this one) with an argument containing s: the
// cluster's components and containerd's shims all name the cluster Dir.
func pidsWithArg(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == s || strings.HasPrefix(a, s+"/") || strings.Contains(a, "="+s+"/") || strings.Contains(a, "://"+s+"/") {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// PIDsWithArg is pidsWithArg for the suites' leak checks.
func PIDsWithArg(s string) []int { return pidsWithArg(s) }

// removeCgroupTree removes a cgroup and its children, deepest first (rmdir is the only way
// to remove a cgroup), retrying while the kernel finishes with exiting tasks.
func removeCgroupTree(root string) error {
	var last error
	for attempt := 0; attempt < 50; attempt++ {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		if len(dirs) == 0 {
			return nil
		}
		sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
		last = nil
		for _, d := range dirs {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				last = fmt.Errorf("rmdir %s: %w", d, err)
			}
		}
		if last == nil {
			if _, err := os.Stat(root); os.IsNotExist(err) {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}
