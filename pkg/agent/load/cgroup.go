package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PodRef names a pod whose cgroup the sampler reads. QOS is the pod's status.qosClass
// (Guaranteed, Burstable, BestEffort); empty means unknown, and every class is tried.
type PodRef struct {
	UID string
	QOS string
}

// PodCounters is one reading of a pod's cgroup.
type PodCounters struct {
	// CPUNanos is the pod's cumulative CPU time.
	CPUNanos uint64
	// MemoryBytes is the pod's memory use without inactive page cache (what the kernel can drop
	// without the pod noticing), as the kubelet's working set counts it.
	MemoryBytes uint64
}

// Reasons a pod's cgroup could not be used, the "reason" label of
// berth_agent_pod_usage_errors_total.
const (
	// PodGone: the cgroup is not there (the pod ended, or its containers are not started yet).
	PodGone = "gone"
	// PodGarbage: a file did not parse.
	PodGarbage = "garbage"
	// PodRange: values beyond what the node can hold (more CPU than the node has, more memory
	// than it has, a counter that went backwards).
	PodRange = "range"
	// PodTooMany: the pod was beyond MaxPods and not read at all.
	PodTooMany = "too_many"
)

// PodError is a pod whose cgroup could not be used; Reason is one of the Pod* constants.
type PodError struct {
	UID    string
	Reason string
	Err    error
}

func (e *PodError) Error() string { return fmt.Sprintf("pod %s: %s: %v", e.UID, e.Reason, e.Err) }
func (e *PodError) Unwrap() error { return e.Err }

// maxCgroupFile bounds what is read of one cgroup file: real ones are well under 4 KiB, and a
// hostile or broken mount must not make the agent buffer without bound.
const maxCgroupFile = 64 << 10

// Cgroups reads pods' usage from a cgroup hierarchy laid out by the kubelet (cgroupfs or
// systemd driver), v1 or v2, under Root (normally /sys/fs/cgroup). The kubelet's own cgroup
// root (its --cgroup-root, "/" on most clusters) is found by looking: see kubeletRoots.
type Cgroups struct {
	Root string
	// v2 is set when Root is a unified (v2) hierarchy; decided once by NewCgroups.
	v2 bool

	mu sync.Mutex
	// parents holds, per controller root, the kubelet roots found under it (relative; "" is
	// the controller root itself), and when they were last looked for.
	parents map[string]kubeletRoots
	now     func() time.Time
}

type kubeletRoots struct {
	rel     []string
	scanned time.Time
}

// Bounds of the search for kubelet roots: how deep below a controller's root, how many
// entries of one directory are read, how many roots are kept, and how often a pod that is not
// found may trigger a new search. A hostile or huge hierarchy costs at most this much.
const (
	kubeletRootDepth    = 3
	kubeletRootDirRead  = 4096
	kubeletRootMax      = 16
	kubeletRootRescanIn = 30 * time.Second
)

// NewCgroups looks at root once to tell v2 (root/cgroup.controllers exists) from v1.
func NewCgroups(root string) *Cgroups {
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return &Cgroups{Root: root, v2: err == nil, parents: map[string]kubeletRoots{}, now: time.Now}
}

// V2 says whether the hierarchy is unified (cgroup v2).
func (c *Cgroups) V2() bool { return c.v2 }

// podDirs are the places a pod's cgroup may be, relative to a controller's root, for the
// cgroupfs and the systemd drivers: kubepods/<qos>/pod<uid> (Guaranteed pods directly under
// kubepods) and kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_>.slice.
func podDirs(p PodRef) []string {
	uid := p.UID
	sd := strings.ReplaceAll(uid, "-", "_")
	classes := []string{"burstable", "besteffort", ""}
	switch strings.ToLower(p.QOS) {
	case "guaranteed":
		classes = []string{""}
	case "burstable":
		classes = []string{"burstable"}
	case "besteffort":
		classes = []string{"besteffort"}
	}
	out := make([]string, 0, 2*len(classes))
	for _, q := range classes {
		if q == "" {
			out = append(out, filepath.Join("kubepods", "pod"+uid),
				filepath.Join("kubepods.slice", "kubepods-pod"+sd+".slice"))
			continue
		}
		out = append(out, filepath.Join("kubepods", q, "pod"+uid),
			filepath.Join("kubepods.slice", "kubepods-"+q+".slice", "kubepods-"+q+"-pod"+sd+".slice"))
	}
	return out
}

// validUID keeps a pod UID from walking the hierarchy: it becomes part of a path.
func validUID(uid string) bool {
	if uid == "" || len(uid) > 64 {
		return false
	}
	for _, c := range uid {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Read returns the pod's counters. Every failure is a *PodError.
func (c *Cgroups) Read(p PodRef) (PodCounters, error) {
	if !validUID(p.UID) {
		return PodCounters{}, &PodError{UID: p.UID, Reason: PodGarbage, Err: errors.New("not a pod UID")}
	}
	var pc PodCounters
	var err error
	if c.v2 {
		pc, err = c.readV2(p)
	} else {
		pc, err = c.readV1(p)
	}
	if err != nil {
		reason := PodGarbage
		if errors.Is(err, fs.ErrNotExist) {
			reason = PodGone
		}
		return PodCounters{}, &PodError{UID: p.UID, Reason: reason, Err: err}
	}
	return pc, nil
}

// find returns the first of p's candidate directories that exists under base or under a
// kubelet root found below it. A miss looks for kubelet roots again, at most every
// kubeletRootRescanIn: a kubelet started with --cgroup-root (several kubelets on one host, or
// a distribution's own slice) puts kubepods deeper than the controller's root.
func (c *Cgroups) find(base string, p PodRef) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	roots, seen := c.parents[base]
	if dir, ok := findUnder(base, roots.rel, p); ok {
		return dir, nil
	}
	if !seen || c.now().Sub(roots.scanned) >= kubeletRootRescanIn {
		roots = kubeletRoots{rel: scanKubeletRoots(base), scanned: c.now()}
		c.parents[base] = roots
		if dir, ok := findUnder(base, roots.rel, p); ok {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no cgroup for pod under %s: %w", base, fs.ErrNotExist)
}

func findUnder(base string, rels []string, p PodRef) (string, bool) {
	for _, rel := range append([]string{""}, rels...) {
		for _, d := range podDirs(p) {
			dir := filepath.Join(base, rel, d)
			if st, err := os.Stat(dir); err == nil && st.IsDir() {
				return dir, true
			}
		}
	}
	return "", false
}

// scanKubeletRoots returns the directories (relative to base, at most kubeletRootDepth down)
// that hold a kubepods or kubepods.slice directory, breadth first, at most kubeletRootMax.
// Symbolic links are not followed, so the search stays inside the hierarchy.
func scanKubeletRoots(base string) []string {
	var out []string
	level := []string{""}
	for depth := 1; depth <= kubeletRootDepth && len(level) > 0 && len(out) < kubeletRootMax; depth++ {
		var next []string
		for _, rel := range level {
			for _, name := range subdirs(filepath.Join(base, rel)) {
				child := filepath.Join(rel, name)
				if name == "kubepods" || name == "kubepods.slice" {
					if rel != "" && len(out) < kubeletRootMax && !slices.Contains(out, rel) {
						out = append(out, rel)
					}
					continue
				}
				next = append(next, child)
			}
		}
		level = next
	}
	return out
}

// subdirs lists at most kubeletRootDirRead directory entries of dir that are directories.
func subdirs(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	ents, _ := f.ReadDir(kubeletRootDirRead)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

func (c *Cgroups) readV2(p PodRef) (PodCounters, error) {
	dir, err := c.find(c.Root, p)
	if err != nil {
		return PodCounters{}, err
	}
	stat, err := readSmall(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return PodCounters{}, err
	}
	usec, ok, err := keyed(stat, "usage_usec")
	if err != nil || !ok {
		return PodCounters{}, fmt.Errorf("cpu.stat: usage_usec: missing or bad (%v)", err)
	}
	if usec > (1<<63)/1000 {
		return PodCounters{}, fmt.Errorf("cpu.stat: usage_usec %d overflows", usec)
	}
	cur, err := readUint(filepath.Join(dir, "memory.current"))
	if err != nil {
		return PodCounters{}, err
	}
	inactive, err := inactiveFile(filepath.Join(dir, "memory.stat"), "inactive_file")
	if err != nil {
		return PodCounters{}, err
	}
	return PodCounters{CPUNanos: usec * 1000, MemoryBytes: cur - min(inactive, cur)}, nil
}

func (c *Cgroups) readV1(p PodRef) (PodCounters, error) {
	var cpuDir string
	var err error
	// Distributions mount cpuacct alone or joined with cpu; both names may exist as links.
	for _, ctrl := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
		if cpuDir, err = c.find(filepath.Join(c.Root, ctrl), p); err == nil {
			break
		}
	}
	if err != nil {
		return PodCounters{}, err
	}
	ns, err := readUint(filepath.Join(cpuDir, "cpuacct.usage"))
	if err != nil {
		return PodCounters{}, err
	}
	memDir, err := c.find(filepath.Join(c.Root, "memory"), p)
	if err != nil {
		return PodCounters{}, err
	}
	usage, err := readUint(filepath.Join(memDir, "memory.usage_in_bytes"))
	if err != nil {
		return PodCounters{}, err
	}
	inactive, err := inactiveFile(filepath.Join(memDir, "memory.stat"), "total_inactive_file")
	if err != nil {
		return PodCounters{}, err
	}
	return PodCounters{CPUNanos: ns, MemoryBytes: usage - min(inactive, usage)}, nil
}

// inactiveFile reads key from a memory.stat; a missing file or key is 0 (the usage then counts
// page cache too, which only overstates), a malformed one an error.
func inactiveFile(path, key string) (uint64, error) {
	b, err := readSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, _, err := keyed(b, key)
	return v, err
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, maxCgroupFile+1)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	if n > maxCgroupFile {
		return nil, fmt.Errorf("%s: over %d bytes", filepath.Base(path), maxCgroupFile)
	}
	return b[:n], nil
}

func readUint(path string) (uint64, error) {
	b, err := readSmall(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return v, nil
}

// keyed finds "key value" in a flat-keyed cgroup file.
func keyed(b []byte, key string) (v uint64, found bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != key {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", key, err)
		}
		return v, true, nil
	}
	return 0, false, sc.Err()
}
