package repo

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// schedulerPlugins is the import path prefix of the scheduler's plugins.
const schedulerPlugins = "github.com/berth-sched/berth/pkg/scheduler/plugins/"

// TestOperatorLinksNoSchedulerPlugin: the operator links none of the scheduler's plugins (issue
// 36). Its rebalancer predicts InstanceIsolation's verdict from pkg/isolation/classrule, the
// rule without the framework; importing a plugin again would pull the plugin's framework
// runtime and its informers into the operator. The scheduler, which does link them, shows the
// check can see a plugin.
func TestOperatorLinksNoSchedulerPlugin(t *testing.T) {
	if bad := under(linked(t, "cmd/operator"), schedulerPlugins); len(bad) > 0 {
		t.Errorf("cmd/operator links %s: take what it needs from a package that is not a plugin (as pkg/isolation/classrule)", strings.Join(bad, ", "))
	}
	if len(under(linked(t, "cmd/scheduler"), schedulerPlugins+"instanceisolation")) == 0 {
		t.Error("cmd/scheduler links no InstanceIsolation: the check lists the wrong packages")
	}
}

// linked is every package the command in dir (a module of go.work) links, from go list -deps.
func linked(t *testing.T, dir string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on PATH to list the links with:", err)
	}
	// why: "." in the command's own directory lists the same with or without go.work.
	cmd := exec.Command(goBin, "list", "-deps", ".")
	cmd.Dir = filepath.Join(repoRoot(t), filepath.FromSlash(dir))
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps in %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatalf("go list -deps in %s: %v", dir, err)
	}
	return strings.Fields(string(out))
}

// under is the packages of list at or under prefix.
func under(list []string, prefix string) []string {
	var out []string
	for _, p := range list {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}
