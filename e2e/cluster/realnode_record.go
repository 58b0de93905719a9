package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A real node leaves things outside its process tree: containerd's shims and the containers
// (they outlive a SIGKILLed owner), mounts under Dir, cgroups named after the node, host paths
// and kernel tunables. Stop undoes them; when the process that owned the cluster was killed
// instead, TeardownKilled undoes them from the record the node wrote as soon as they existed.

// recordFile is the record's name under the cluster Dir.
const recordFile = "realnode.json"

// NodeRecord is what a later process needs to tear down a real node whose owner died.
type NodeRecord struct {
	NodeName         string            `json:"nodeName"`
	CgroupName       string            `json:"cgroupName"`
	Network          string            `json:"network"`
	Cgroups          []string          `json:"cgroups"`
	Sysctls          map[string]string `json:"sysctls"`
	CreatedHostPaths []string          `json:"createdHostPaths"`
	NetNSInode       uint64            `json:"netnsInode"`
	// Nodes are every node's name and containerd socket (the first node's too).
	Nodes []NodeRecordEntry `json:"nodes,omitempty"`
}

// NodeRecordEntry is one real node in a NodeRecord.
type NodeRecordEntry struct {
	Name       string `json:"name"`
	Socket     string `json:"socket"`
	CgroupName string `json:"cgroupName"`
	NetNSInode uint64 `json:"netnsInode"`
}

// saveRecord writes the node's record (best effort: without it a killed owner's cgroups stay).
func (c *Cluster) saveRecord() {
	rs := c.realNodes()
	if rs == nil || len(rs.nodes) == 0 {
		return
	}
	r := rs.nodes[0]
	rec := NodeRecord{NodeName: r.NodeName, CgroupName: r.CgroupName, Network: r.Network, Cgroups: rs.cgroups(),
		Sysctls: rs.sysctls, CreatedHostPaths: rs.createdHostPaths, NetNSInode: r.NetNSInode}
	for _, n := range rs.nodes {
		rec.Nodes = append(rec.Nodes, NodeRecordEntry{Name: n.NodeName, Socket: n.paths.Socket, CgroupName: n.CgroupName, NetNSInode: n.NetNSInode})
	}
	b, err := json.Marshal(rec)
	if err == nil {
		err = os.WriteFile(filepath.Join(c.Dir, recordFile), b, 0o644)
	}
	if err != nil {
		c.cfg.Logf("real node: writing %s: %v", recordFile, err)
	}
}

// ReadNodeRecord reads the record a real node left in the cluster dir (nil, nil: none).
func ReadNodeRecord(dir string) (*NodeRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec NodeRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, recordFile), err)
	}
	return &rec, nil
}

// TeardownKilled cleans up after a cluster whose owning process died without Stop: it kills
// every process that names dir (components, shims) and every process in the real node's
// cgroups, unmounts everything under dir, removes the cgroups, the node's host-path entries and
// CNI cache, and restores the kernel tunables. It does not remove dir itself.
func TeardownKilled(dir string, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	rec, err := ReadNodeRecord(dir)
	if err != nil {
		return err
	}
	if rec == nil {
		// No real node (or killed before its cgroups existed): its processes and mounts are
		// all found through dir.
		for attempt := 0; attempt < 50; attempt++ {
			pids := pidsWithArg(dir)
			if len(pids) == 0 {
				break
			}
			for _, pid := range pids {
				logf("killing leftover process %d", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return UnmountUnder(dir)
	}
	c := &Cluster{Dir: dir, cfg: Config{Logf: logf}}
	// The cgroups of every node are in rec.Cgroups; the nodes carry the sockets, whose shims'
	// host-side sockets teardown removes.
	first := &RealNode{NodeName: rec.NodeName, CgroupName: rec.CgroupName, Network: rec.Network,
		NetNSInode: rec.NetNSInode, cgroups: rec.Cgroups, paths: newRealNodePaths(dir)}
	// why: the socket as recorded (every node's lives under Dir/cri/<name>), never re-derived.
	first.paths.Socket = criSocket(dir, rec.NodeName)
	rs := &realNodes{nodes: []*RealNode{first}, sysctls: rec.Sysctls, createdHostPaths: rec.CreatedHostPaths}
	names := []string{rec.NodeName}
	for _, n := range rec.Nodes {
		if n.Name == rec.NodeName {
			if n.Socket != "" {
				first.paths.Socket = n.Socket
			}
			continue
		}
		names = append(names, n.Name)
		rs.nodes = append(rs.nodes, &RealNode{NodeName: n.Name, CgroupName: n.CgroupName, NetNSInode: n.NetNSInode,
			ContainerdSocket: n.Socket, paths: realNodePaths{Socket: n.Socket}})
	}
	first.ContainerdSocket = first.paths.Socket
	c.real = rs
	logf("tearing down real nodes %s left by a killed run (cgroup %s)", strings.Join(names, ", "), rec.CgroupName)
	return c.realNodeTeardown()
}
