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
	"runtime"
	"runtime/debug"
	"sort"

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
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: seccompdefault OUT.json")
		os.Exit(2)
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
	d := Data{Source: "github.com/containerd/containerd/v2/contrib/seccomp DefaultProfile, containerd's default capability set", Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/containerd/containerd/v2" {
				d.Version = m.Version
			}
		}
	}
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
