package cluster

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Footprint is the cluster's memory as the kernel reports it: the resident set of every
// process that belongs to it, read from /proc (a budget to print, never to assert on).
type Footprint struct {
	RSSBytes  uint64
	Processes int
	// ByComponent sums RSS per command name (etcd, kubelet, containerd-shim-runc-v2, ...).
	ByComponent map[string]uint64
}

// Footprint sums VmRSS over the cluster's processes: its components and whatever else names
// its Dir (containerd shims), every process in the real nodes' cgroups (the containers), and
// extra (the calling process, which holds the forwarders).
func (c *Cluster) Footprint(extra ...int) Footprint {
	seen := map[int]bool{}
	var pids []int
	add := func(ps ...int) {
		for _, p := range ps {
			if p > 0 && !seen[p] {
				seen[p] = true
				pids = append(pids, p)
			}
		}
	}
	add(extra...)
	for _, p := range c.Processes() {
		add(p.PID())
	}
	add(pidsWithArg(c.Dir)...)
	if rs := c.realNodes(); rs != nil {
		add(cgroupPIDs(rs.cgroups())...)
	}
	sort.Ints(pids)
	f := Footprint{ByComponent: map[string]uint64{}}
	for _, pid := range pids {
		rss, name, err := procRSS(pid)
		if err != nil {
			continue // exited meanwhile
		}
		f.RSSBytes += rss
		f.Processes++
		f.ByComponent[name] += rss
	}
	return f
}

// String prints the total and the largest components.
func (f Footprint) String() string {
	type kv struct {
		k string
		v uint64
	}
	var l []kv
	for k, v := range f.ByComponent {
		l = append(l, kv{k, v})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v })
	var parts []string
	for i, e := range l {
		if i == 6 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d MiB", e.k, e.v>>20))
	}
	return fmt.Sprintf("%d MiB RSS in %d processes (%s)", f.RSSBytes>>20, f.Processes, strings.Join(parts, ", "))
}

// procRSS reads a process's VmRSS and command name from /proc/<pid>/status.
func procRSS(pid int) (uint64, string, error) {
	fh, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, "", err
	}
	defer fh.Close()
	var name string
	var rss uint64
	s := bufio.NewScanner(fh)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Name":
			name = v
		case "VmRSS":
			n, err := strconv.ParseUint(strings.TrimSuffix(v, " kB"), 10, 64)
			if err != nil {
				return 0, "", fmt.Errorf("pid %d VmRSS %q: %w", pid, v, err)
			}
			rss = n << 10
		}
	}
	return rss, name, s.Err()
}
