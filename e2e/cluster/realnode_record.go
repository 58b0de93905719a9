package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
}

// saveRecord writes the node's record (best effort: without it a killed owner's cgroups stay).
func (c *Cluster) saveRecord() {
	r := c.realNode()
	if r == nil {
		return
	}
	rec := NodeRecord{NodeName: r.NodeName, CgroupName: r.CgroupName, Network: r.Network, Cgroups: r.cgroups,
		Sysctls: r.sysctls, CreatedHostPaths: r.createdHostPaths, NetNSInode: r.NetNSInode}
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
	c.node = &RealNode{NodeName: rec.NodeName, CgroupName: rec.CgroupName, Network: rec.Network,
		NetNSInode: rec.NetNSInode, cgroups: rec.Cgroups, sysctls: rec.Sysctls,
		createdHostPaths: rec.CreatedHostPaths, paths: newRealNodePaths(dir)}
	c.node.ContainerdSocket = c.node.paths.Socket
	logf("tearing down real node %s left by a killed run (cgroup %s)", rec.NodeName, rec.CgroupName)
	return c.realNodeTeardown()
}
