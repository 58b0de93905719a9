package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// SkipRealNodeEnv is the variable that lets `make test` run on a machine without root or the
// real node's packages. Only when it is set to exactly "1" do the suites that need them skip;
// otherwise they run and fail with the fix (hack/preflight.sh names it before the run starts).
const SkipRealNodeEnv = "BERTH_SKIP_REAL_NODE"

// SkippingRealNode reports whether the user asked, explicitly, to leave the real node out.
func SkippingRealNode() bool { return os.Getenv(SkipRealNodeEnv) == "1" }

// TB is the part of testing.TB these helpers use.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
}

// NeedRealNode marks a test (or a whole suite, from its first test) as needing root and the
// real node's packages. It skips, loudly, only under BERTH_SKIP_REAL_NODE=1; hack/preflight.sh
// finds the suites that call it and lists them as left out.
func NeedRealNode(t TB) {
	t.Helper()
	if SkippingRealNode() {
		t.Skipf("SKIPPED: %s=1 leaves out every test that needs a real node (root, containerd, runc, CNI plugins, iptables); unset it for the full run", SkipRealNodeEnv)
	}
}

// NeedHostTool returns the path of a host tool a test needs (Debian package pkg). When it is
// missing the test skips, loudly, under BERTH_SKIP_REAL_NODE=1 and otherwise fails with the
// apt-get line (failing is the point: the test is the only proof of what the tool backs).
func NeedHostTool(t interface {
	TB
	Fatalf(format string, args ...any)
}, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if st, err := os.Stat(filepath.Join(d, name)); err == nil && st.Mode()&0o111 != 0 {
			return filepath.Join(d, name)
		}
	}
	msg := fmt.Sprintf("%s is not installed: apt-get install -y %s", name, pkg)
	if SkippingRealNode() {
		t.Skipf("SKIPPED under %s=1: %s", SkipRealNodeEnv, msg)
	}
	t.Fatalf("%s", msg)
	return ""
}
