package profiles

import (
	"slices"
	"testing"
)

// The shipped data is containerd's default profile for an unprivileged container: the common
// calls are in, what needs a capability a RuntimeDefault pod lacks is out.
func TestContainerdDefault(t *testing.T) {
	d, err := ContainerdDefault()
	if err != nil {
		t.Fatal(err)
	}
	if d.Version == "" || d.Source == "" || d.Arch == "" {
		t.Fatalf("source %q version %q arch %q: each must be named", d.Source, d.Version, d.Arch)
	}
	for _, in := range []string{"read", "write", "openat", "futex", "epoll_wait", "clone"} {
		if !slices.Contains(d.Syscalls, in) {
			t.Errorf("%s missing", in)
		}
	}
	for _, out := range []string{"kexec_load", "mount", "init_module", "reboot", "bpf"} {
		if slices.Contains(d.Syscalls, out) {
			t.Errorf("%s allowed, but it needs a capability RuntimeDefault pods do not have", out)
		}
	}
	if !slices.IsSorted(d.Syscalls) || len(slices.Compact(slices.Clone(d.Syscalls))) != len(d.Syscalls) {
		t.Error("syscalls must be sorted and unique (generated)")
	}
}
