// Package preflight tests hack/preflight.sh, the check `make test` runs before any tier: it is
// run with a PATH of stub tools (and a stub `id`), so each case decides exactly what the machine
// lacks, whatever this machine has.
package preflight

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sched/berth/e2e/cluster"
)

// tools are the commands the script looks for; cniPlugins the files in the CNI dir.
var (
	tools      = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables", "iptables-save", "ip", "nsenter", "prometheus"}
	cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}
)

func stub(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestPreflight(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "preflight.sh")
	cases := []struct {
		name       string
		lack       []string // tools or CNI plugins absent
		uid        string
		skipEnv    string
		wantExit   int
		want       []string // substrings of the output
		notWant    []string
		wantSuites bool // the left-out suites are named
	}{
		{name: "everything present", uid: "0", wantExit: 0,
			want: []string{"every tier will run"}, notWant: []string{"apt-get"}},
		{name: "PATH lacking iptables-save: one message naming the apt-get line", lack: []string{"iptables-save"}, uid: "0", wantExit: 1,
			want:    []string{"missing iptables-save", "apt-get install -y iptables\n", "BERTH_SKIP_REAL_NODE=1 make test"},
			notWant: []string{"containerd", "prometheus"}},
		{name: "several missing: each package once", lack: []string{"iptables", "iptables-save", "ctr", "prometheus", "bridge"}, uid: "0", wantExit: 1,
			want: []string{"apt-get install -y containerd iptables prometheus containernetworking-plugins\n"}},
		{name: "not root", uid: "1000", wantExit: 1,
			want: []string{"not root (uid 1000)", "Run make test as root"}, notWant: []string{"apt-get"}},
		{name: "missing under BERTH_SKIP_REAL_NODE=1: runs on, names what is left out", lack: []string{"iptables-save", "prometheus"}, uid: "0", skipEnv: "1", wantExit: 0,
			want:       []string{"BERTH_SKIP_REAL_NODE=1: NOT running every test", "missing iptables-save prometheus", "prometheus_test.go (prometheus)", "apt-get install -y iptables prometheus"},
			wantSuites: true},
		{name: "the variable set on a full machine still says what it leaves out", uid: "0", skipEnv: "1", wantExit: 0,
			want: []string{"NOT running every test (nothing is missing, but the variable is set)"}, notWant: []string{"prometheus_test.go"}, wantSuites: true},
		{name: "only exactly 1 skips", lack: []string{"runc"}, uid: "0", skipEnv: "true", wantExit: 1,
			want: []string{"apt-get install -y runc\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin, cni := t.TempDir(), t.TempDir()
			lack := map[string]bool{}
			for _, l := range tc.lack {
				lack[l] = true
			}
			for _, tool := range tools {
				if !lack[tool] {
					stub(t, filepath.Join(bin, tool), "exit 0")
				}
			}
			for _, p := range cniPlugins {
				if !lack[p] {
					stub(t, filepath.Join(cni, p), "exit 0")
				}
			}
			stub(t, filepath.Join(bin, "id"), "echo "+tc.uid)
			cmd := exec.Command(bash, script)
			// Why BERTH_PREFLIGHT_SBIN is empty: otherwise the script also finds this machine's
			// own /usr/sbin/iptables-save, and the case would depend on the host.
			cmd.Env = []string{"PATH=" + bin, "BERTH_CNI_DIR=" + cni, "BERTH_PREFLIGHT_SBIN="}
			if tc.skipEnv != "" {
				cmd.Env = append(cmd.Env, "BERTH_SKIP_REAL_NODE="+tc.skipEnv)
			}
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantExit {
				t.Errorf("exit %d, want %d; output:\n%s", code, tc.wantExit, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(string(out), w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			// ONE message: a failing preflight prints a single apt-get line.
			if n := strings.Count(string(out), "apt-get install"); n > 1 {
				t.Errorf("%d apt-get lines, want at most one:\n%s", n, out)
			}
			for _, s := range []string{"e2e/suites/realnode/realnode_test.go (its tests that need a real node)", "e2e/suites/helm/helm_test.go (its tests that need a real node)",
				"e2e/cluster/karpenter_netns_test.go (its tests that need root)"} {
				if got := strings.Contains(string(out), s); got != tc.wantSuites {
					t.Errorf("names %s: %v, want %v:\n%s", s, got, tc.wantSuites, out)
				}
			}
		})
	}
}
