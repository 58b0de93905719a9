// Command seccompdefault writes the syscall set of containerd's default seccomp profile (what a
// container with `seccompProfile: RuntimeDefault` gets on containerd) as SySched data: the
// syscalls the profile allows a container with containerd's default capability set, on the
// architecture it runs on. Its own module so containerd's dependency graph never mixes with
// Berth's; run by `make seccomp-data`, output committed under
// pkg/scheduler/plugins/sysched/profiles/runtimedefault/.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// defaultCaps is containerd's default capability set for a container (oci.defaultUnixCaps):
// the profile adds syscalls only for capabilities beyond it (CAP_SYS_ADMIN, CAP_SYS_PTRACE, ...),
// which a RuntimeDefault pod does not have unless it asks.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// Data is the file's shape (profiles.RuntimeDefault reads it).
type Data struct {
	Source   string   `json:"source"`
	Version  string   `json:"version"`
	Arch     string   `json:"arch"`
	Syscalls []string `json:"syscalls"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: seccompdefault CONTAINERD.json SYSCALLS.json")
		os.Exit(2)
	}
	if err := writeUniverse(os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "seccompdefault:", err)
		os.Exit(1)
	}
	sp := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: defaultCaps, Effective: defaultCaps, Permitted: defaultCaps}}}
	prof := seccomp.DefaultProfile(sp)
	set := map[string]bool{}
	for _, s := range prof.Syscalls {
		// Rules restricted by arguments (clone's flags, personality's persona) still expose
		// the syscall: ExS counts what a container can reach, not every way to call it.
		if s.Action == specs.ActAllow || s.Action == specs.ActLog {
			for _, n := range s.Names {
				set[n] = true
			}
		}
	}
	d := Data{Source: "github.com/containerd/containerd/v2/contrib/seccomp DefaultProfile, containerd's default capability set",
		Version: depVersion("github.com/containerd/containerd/v2"), Arch: runtime.GOARCH}
	for n := range set {
		d.Syscalls = append(d.Syscalls, n)
	}
	sort.Strings(d.Syscalls)
	out, err := json.MarshalIndent(d, "", "  ")
	if err == nil {
		err = os.WriteFile(os.Args[1], append(out, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "seccompdefault:", err)
		os.Exit(1)
	}
}

// sysRE matches a syscall number constant in golang.org/x/sys/unix's generated tables.
var sysRE = regexp.MustCompile(`(?m)^\s*SYS_([A-Z0-9_]+)\s*=\s*\d+`)

// writeUniverse writes every Linux syscall name of every architecture, from the syscall tables
// golang.org/x/sys/unix generates from the kernel headers: the names SySched can tell from
// typos in a profile.
func writeUniverse(out string) error {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		return fmt.Errorf("finding golang.org/x/sys: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(dir)), "unix", "zsysnum_linux_*.go"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no syscall tables under %s (%v)", dir, err)
	}
	set := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, m := range sysRE.FindAllSubmatch(b, -1) {
			set[strings.ToLower(string(m[1]))] = true
		}
	}
	u := struct {
		Source   string   `json:"source"`
		Version  string   `json:"version"`
		Syscalls []string `json:"syscalls"`
	}{Source: "golang.org/x/sys/unix zsysnum_linux_*.go, every architecture", Version: depVersion("golang.org/x/sys")}
	for n := range set {
		u.Syscalls = append(u.Syscalls, n)
	}
	sort.Strings(u.Syscalls)
	b, err := json.MarshalIndent(u, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// depVersion is the version of module path this tool was built with: the data names it.
func depVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return ""
}
