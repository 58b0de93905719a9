package cluster

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Paths outside the cluster Dir that the kubelet and containerd write whatever they are told:
// the kubelet's device-plugin socket and container log links, libcni's result cache, and
// containerd 1.6's shim sockets. Teardown removes this cluster's entries in them and, deepest
// first, the directories that did not exist before the cluster started (only when empty).
var hostPaths = []string{
	"/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/log/containers",
	"/var/lib/cni", "/var/lib/cni/results", "/run/containerd", "/run/containerd/s",
}

func absentHostPaths() []string {
	var out []string
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			out = append(out, p)
		}
	}
	return out
}

// shimSocket is where containerd 1.6 puts the socket of the shim serving (address, namespace,
// id): /run/containerd/s/sha256(address/namespace/id).
func shimSocket(address, namespace, id string) string {
	return fmt.Sprintf("/run/containerd/s/%x", sha256.Sum256([]byte(filepath.Join(address, namespace, id))))
}

// shimSockets finds the sockets of the running shims serving this containerd (by their flags).
func shimSockets(address string) []string {
	var out []string
	for _, pid := range pidsWithArg(address) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		flags := map[string]string{}
		for i := 0; i+1 < len(args); i++ {
			if strings.HasPrefix(args[i], "-") {
				flags[strings.TrimLeft(args[i], "-")] = args[i+1]
			}
		}
		if flags["address"] == address && flags["id"] != "" {
			out = append(out, shimSocket(address, flags["namespace"], flags["id"]))
		}
	}
	return out
}

// cleanHostPaths removes this cluster's entries outside Dir, then the directories it created.
func cleanHostPaths(dir string, shimSocks, created []string) {
	for _, s := range shimSocks {
		_ = os.Remove(s)
	}
	// Container log links point into the node's pod-logs dir.
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if t, err := os.Readlink(l); err == nil && strings.HasPrefix(t, dir+"/") {
			_ = os.Remove(l)
		}
	}
	// libcni results name the pod's network namespace, which is under Dir.
	results, _ := filepath.Glob("/var/lib/cni/results/*")
	for _, r := range results {
		if b, err := os.ReadFile(r); err == nil && strings.Contains(string(b), dir+"/") {
			_ = os.Remove(r)
		}
	}
	created = append([]string(nil), created...)
	sort.Slice(created, func(i, j int) bool { return len(created[i]) > len(created[j]) })
	for _, p := range created {
		if p == "/var/lib/kubelet/device-plugins" {
			// The kubelet's socket name is fixed; the directory is ours, so is the socket.
			_ = os.Remove(filepath.Join(p, "kubelet.sock"))
		}
		_ = os.Remove(p) // only if empty: another cluster may use it now
	}
}
