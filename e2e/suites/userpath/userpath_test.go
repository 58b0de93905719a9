// Package userpath follows the README's path with the real commands, as separate processes:
// `berth-local up` (a supervisor keeps a cluster with a real node running), the helm install
// and kubectl lines it prints (bin/helm, bin/kubectl), a Deployment placed by the installed
// berth-scheduler, and `berth-local down`, which must leave nothing behind. It also covers the
// bad inputs: a second up, down with nothing running, and stale pid files (a dead pid, a pid
// recycled by another program, a supervisor killed with SIGKILL).
package userpath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

var (
	berthLocal string // built from source by TestMain, so the test runs the code under test
	repoRoot   string
	binDir     string
)

func TestMain(m *testing.M) {
	// The supervisor and berth-local inherit TMPDIR: whatever they leave there fails the suite.
	check := framework.IsolateTemp()
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "userpath:", err)
		code = 1
	}
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, "userpath:", err)
		code = 1
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return 0, err
	}
	repoRoot = root
	if binDir, err = cluster.ResolveBinDir(""); err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp("", "berth-userpath-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	berthLocal = filepath.Join(tmp, "berth-local")
	build := exec.Command("go", "build", "-o", berthLocal, "./e2e/cmd/berth-local")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building berth-local: %v\n%s", err, out)
	}
	return m.Run(), nil
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout ---\n%s--- stderr ---\n%s", r.code, r.stdout, r.stderr)
}

// run runs a command from the repository root (where make runs berth-local and where the
// printed commands' relative paths point).
func run(t *testing.T, env []string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func local(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, []string{"BERTH_BIN_DIR=" + binDir}, berthLocal, args...)
}

// stateDir is a fresh state directory for berth-local; whatever happens, the cluster in it is
// stopped and the directory removed at the end.
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "berth-userpath-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(dir); err == nil {
			if r := local(t, "down", "-dir", dir); r.code != 0 {
				t.Errorf("cleanup down: %s", r)
			}
			os.RemoveAll(dir)
		}
	})
	return dir
}

// nextSteps are the commands up prints, by what they start with.
type nextSteps struct {
	kubeconfig, helm, apply, events string
	pid                             int
}

var pidRe = regexp.MustCompile(`Supervisor pid (\d+)`)

func parseUp(t *testing.T, r result, realNode bool) nextSteps {
	t.Helper()
	var s nextSteps
	for _, l := range strings.Split(r.stdout, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "export KUBECONFIG="):
			s.kubeconfig = strings.TrimPrefix(l, "export KUBECONFIG=")
		case strings.Contains(l, "helm install "):
			s.helm = l
		case strings.Contains(l, "kubectl apply "):
			s.apply = l
		case strings.Contains(l, "kubectl get events"):
			s.events = l
		}
	}
	if m := pidRe.FindStringSubmatch(r.stdout); m != nil {
		s.pid, _ = strconv.Atoi(m[1])
	}
	if s.kubeconfig == "" || (s.helm == "") == realNode || s.apply == "" || s.events == "" || s.pid == 0 {
		t.Fatalf("up did not print every next step (kubeconfig, helm install with a real node only, kubectl apply, kubectl get events, pid):\n%s", r)
	}
	return s
}

func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestUpHelmInstallWorkloadDown(t *testing.T) {
	framework.NeedRealNode(t)
	before := framework.ReadHostStateAlone(t)
	dir := stateDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	start := time.Now()
	r := local(t, "up", "-dir", dir)
	if r.code != 0 {
		t.Fatalf("up: %s", r)
	}
	t.Logf("up took %s", time.Since(start).Round(100*time.Millisecond))
	if !strings.Contains(r.stdout, `real node "berth-real"`) {
		t.Fatalf("up did not bring a real node:\n%s", r)
	}
	steps := parseUp(t, r, true)
	// up has returned: the cluster must be served by the supervisor alone.
	cs := clientFor(t, steps.kubeconfig)
	if _, err := cs.CoreV1().Nodes().Get(ctx, "berth-real", metav1.GetOptions{}); err != nil {
		t.Fatalf("the real node after up returned: %v", err)
	}
	clusterDir := filepath.Join(dir, "cluster")
	rec, err := cluster.ReadNodeRecord(clusterDir)
	if err != nil || rec == nil {
		t.Fatalf("no real node record in %s: %v", clusterDir, err)
	}

	t.Run("a second up while one runs: a clear error, the running cluster untouched", func(t *testing.T) {
		r := local(t, "up", "-dir", dir)
		if r.code == 0 || !strings.Contains(r.stderr, "already running") || !strings.Contains(r.stderr, fmt.Sprintf("pid %d", steps.pid)) ||
			!strings.Contains(r.stderr, "make down") {
			t.Errorf("second up: want a non-zero exit naming the running supervisor and `make down`, got %s", r)
		}
		if syscall.Kill(steps.pid, 0) != nil {
			t.Fatalf("the supervisor %d died after a second up", steps.pid)
		}
		if _, err := cs.CoreV1().Nodes().Get(ctx, "berth-real", metav1.GetOptions{}); err != nil {
			t.Fatalf("the cluster after a second up: %v", err)
		}
	})

	helmHome := t.TempDir()
	env := []string{"KUBECONFIG=" + steps.kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(helmHome, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME=" + filepath.Join(helmHome, "data")}
	t.Run("the printed helm install line installs Berth", func(t *testing.T) {
		// From the repository root (as make runs it) the line reads like the README's: bin/helm.
		helm := filepath.Join(binDir, "helm")
		if r, err := filepath.Rel(repoRoot, helm); err == nil && !strings.HasPrefix(r, "..") {
			helm = r
		}
		if !strings.HasPrefix(steps.helm, helm+" install berth charts/berth ") {
			t.Errorf("helm line %q does not run %s install berth charts/berth", steps.helm, helm)
		}
		start := time.Now()
		r := run(t, env, "sh", "-c", steps.helm)
		if r.code != 0 || !strings.Contains(r.stdout, "STATUS: deployed") {
			t.Fatalf("%s: %s", steps.helm, r)
		}
		t.Logf("helm install --wait took %s", time.Since(start).Round(100*time.Millisecond))
	})

	t.Run("the printed kubectl lines: a Deployment placed by the installed berth-scheduler", func(t *testing.T) {
		if r := run(t, env, "sh", "-c", steps.apply); r.code != 0 {
			t.Fatalf("%s: %s", steps.apply, r)
		}
		pods, err := framework.WaitPods(ctx, cs, "default", "app=hello-berth", 2, 3*time.Minute, framework.Running)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods {
			// `up` runs three real nodes by default (berth-real, berth-real-2, berth-real-3).
			if !strings.HasPrefix(pods[i].Spec.NodeName, "berth-real") {
				t.Errorf("pod %s on %q, want a real node", pods[i].Name, pods[i].Spec.NodeName)
			}
			ev, err := framework.WaitSchedulingEvent(ctx, cs, &pods[i], "Scheduled", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Scheduler != "berth-scheduler" {
				t.Errorf("pod %s: Scheduled reported by %q, want berth-scheduler", pods[i].Name, ev.Scheduler)
			}
		}
		// The scheduler that placed them is the chart's pod, not a process of the harness.
		sched, err := framework.WaitPods(ctx, cs, "berth-system", "app.kubernetes.io/name=berth-scheduler", 1, time.Minute, framework.Running)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(sched[0].Spec.NodeName, "berth-real") {
			t.Errorf("scheduler pod on %q, want a real node", sched[0].Spec.NodeName)
		}
		r := run(t, env, "sh", "-c", steps.events)
		if r.code != 0 {
			t.Fatalf("%s: %s", steps.events, r)
		}
		for _, p := range pods {
			if !regexp.MustCompile(regexp.QuoteMeta(p.Name) + `\s+berth-scheduler\s+Successfully assigned default/` + regexp.QuoteMeta(p.Name) + ` to berth-real`).MatchString(r.stdout) {
				t.Errorf("the events line does not show %s placed by berth-scheduler:\n%s", p.Name, r.stdout)
			}
		}
	})

	// down: record what the cluster owns, stop it, and look for every kind of leftover.
	owned := append([]int{steps.pid}, cluster.PIDsWithArg(clusterDir)...)
	held := holdNodeNetNS(t, rec)
	start = time.Now()
	r = local(t, "down", "-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "local cluster stopped") {
		t.Fatalf("down: %s", r)
	}
	t.Logf("down took %s", time.Since(start).Round(100*time.Millisecond))
	checkNothingLeft(t, before, dir, rec, owned, held)

	r = local(t, "down", "-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "no local cluster running") {
		t.Errorf("down with nothing running: want exit 0 and 'no local cluster running', got %s", r)
	}
}

func TestStalePidFile(t *testing.T) {
	// A process that is not berth-local, alive, whose pid a stale file names: down must leave it.
	other := exec.Command("sleep", "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, pid, want string
	}{
		{"the pid is dead", strconv.Itoa(dead.Process.Pid), fmt.Sprintf("pid %d is not running", dead.Process.Pid)},
		{"the pid belongs to another program", strconv.Itoa(other.Process.Pid), fmt.Sprintf("pid %d is now another program (sleep 300), left alone", other.Process.Pid)},
		{"the pid file is garbage", "not-a-pid", "no readable pid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := stateDir(t)
			if err := os.WriteFile(filepath.Join(dir, "berth-local.pid"), []byte(tc.pid+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := local(t, "down", "-dir", dir)
			if r.code != 0 || !strings.Contains(r.stderr, "stale pid file") || !strings.Contains(r.stderr, tc.want) ||
				!strings.Contains(r.stdout, "no local cluster was running") {
				t.Errorf("down: want exit 0, 'stale pid file … %s', got %s", tc.want, r)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("state dir %s left: %v", dir, err)
			}
			if syscall.Kill(other.Process.Pid, 0) != nil {
				t.Fatalf("down killed an unrelated process (pid %d)", other.Process.Pid)
			}
		})
	}
}

func TestKilledRunIsCleanedUpByTheNextUp(t *testing.T) {
	framework.NeedRealNode(t)
	before := framework.ReadHostStateAlone(t)
	dir := stateDir(t)
	r := local(t, "up", "-dir", dir)
	if r.code != 0 {
		t.Fatalf("up: %s", r)
	}
	steps := parseUp(t, r, true)
	clusterDir := filepath.Join(dir, "cluster")
	rec, err := cluster.ReadNodeRecord(clusterDir)
	if err != nil || rec == nil {
		t.Fatalf("no real node record: %v", err)
	}
	// A pod, so that there are shims and containers for the kill to orphan.
	cs := clientFor(t, steps.kubeconfig)
	spec := framework.PodSpec("", "10m", "16Mi")
	spec.Containers[0].Image = cluster.PauseImage
	spec.Containers[0].ImagePullPolicy = corev1.PullNever
	if _, err := cs.CoreV1().Pods("default").Create(context.Background(), framework.Pod("default", "orphan", map[string]string{"app": "orphan"}, spec), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.WaitPods(context.Background(), cs, "default", "app=orphan", 1, 2*time.Minute, framework.Running); err != nil {
		t.Fatal(err)
	}
	// The pod runs on one of the real nodes: count the shims of every node's containerd.
	var shims []int
	for _, n := range rec.Nodes {
		shims = append(shims, cluster.PIDsWithArg(n.Socket)...)
	}
	if len(shims) == 0 {
		t.Fatal("no containerd shim before the kill: nothing would prove the cleanup")
	}
	owned := append([]int{steps.pid}, cluster.PIDsWithArg(clusterDir)...)
	if err := syscall.Kill(steps.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for framework.Alive(steps.pid) {
		time.Sleep(50 * time.Millisecond)
	}
	// What SIGKILL leaves: the shims outlive their containerd (this is why a record is kept).
	alive := 0
	for _, pid := range shims {
		if framework.Alive(pid) {
			alive++
		}
	}
	t.Logf("after SIGKILL of the supervisor: %d of %d shims alive", alive, len(shims))

	r = local(t, "up", "-dir", dir)
	if r.code != 0 {
		t.Fatalf("up after a killed run: %s", r)
	}
	for _, w := range []string{"stale pid file", fmt.Sprintf("pid %d is not running", steps.pid), "cleaned up"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("up after a killed run does not say %q:\n%s", w, r)
		}
	}
	steps2 := parseUp(t, r, true)
	// The killed run's cgroup and processes are gone while the new cluster runs.
	cms, err := cluster.CgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cms {
		if _, err := os.Stat(filepath.Join(m.Point, rec.CgroupName)); err == nil {
			t.Errorf("the killed run's cgroup %s is still there", filepath.Join(m.Point, rec.CgroupName))
		}
	}
	for _, pid := range owned {
		if framework.Alive(pid) {
			t.Errorf("process %d of the killed run survived: %s", pid, framework.Cmdline(pid))
		}
	}
	rec2, err := cluster.ReadNodeRecord(clusterDir)
	if err != nil || rec2 == nil {
		t.Fatalf("no real node record for the new run: %v", err)
	}
	owned2 := append([]int{steps2.pid}, cluster.PIDsWithArg(clusterDir)...)
	held := holdNodeNetNS(t, rec2)
	if r := local(t, "down", "-dir", dir); r.code != 0 {
		t.Fatalf("down: %s", r)
	}
	checkNothingLeft(t, before, dir, rec2, owned2, held)
}

// holdNodeNetNS holds every node's network namespace of rec across the stop (HoldNetNS).
func holdNodeNetNS(t *testing.T, rec *cluster.NodeRecord) *framework.NetNSHold {
	t.Helper()
	inodes := []uint64{rec.NetNSInode}
	for _, n := range rec.Nodes {
		if n.NetNSInode != rec.NetNSInode {
			inodes = append(inodes, n.NetNSInode)
		}
	}
	return framework.HoldNetNS(t, inodes...)
}

// checkNothingLeft: processes, mounts, the namespace, cgroups, root-namespace iptables, links,
// host paths, kernel tunables and the state directory.
func checkNothingLeft(t *testing.T, before framework.HostState, dir string, rec *cluster.NodeRecord, owned []int, held *framework.NetNSHold) {
	t.Helper()
	framework.CheckLeftovers(t, framework.Leftovers{Stop: "down", PIDs: owned, Dir: dir, DirName: "state dir",
		NetNS: held, Cgroups: []string{rec.CgroupName}})
	after := framework.ReadHostStateAlone(t)
	after.CheckUnchanged(t, before)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir %s not removed: %v", dir, err)
	}
}

// Without root or the packages, up falls back to simulated nodes and berth-scheduler as a
// process (no helm line: nothing of the chart could run); the printed kubectl lines still show
// the example placed by berth-scheduler. Needs no root, so it runs everywhere.
func TestSimulatedUpDown(t *testing.T) {
	dir := stateDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := local(t, "up", "-simulated", "-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "SIMULATED (KWOK) nodes") {
		t.Fatalf("up -simulated: %s", r)
	}
	steps := parseUp(t, r, false)
	env := []string{"KUBECONFIG=" + steps.kubeconfig}
	if r := run(t, env, "sh", "-c", steps.apply); r.code != 0 {
		t.Fatalf("%s: %s", steps.apply, r)
	}
	cs := clientFor(t, steps.kubeconfig)
	pods, err := framework.WaitPods(ctx, cs, "default", "app=hello-berth", 2, 2*time.Minute, framework.Bound)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		ev, err := framework.WaitSchedulingEvent(ctx, cs, &pods[i], "Scheduled", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Scheduler != "berth-scheduler" {
			t.Errorf("pod %s: Scheduled reported by %q, want berth-scheduler", pods[i].Name, ev.Scheduler)
		}
	}
	if r := run(t, env, "sh", "-c", steps.events); r.code != 0 || strings.Count(r.stdout, "berth-scheduler") != 2 {
		t.Errorf("%s: want two pods placed by berth-scheduler: %s", steps.events, r)
	}
	owned := append([]int{steps.pid}, cluster.PIDsWithArg(filepath.Join(dir, "cluster"))...)
	if r := local(t, "down", "-dir", dir); r.code != 0 || !strings.Contains(r.stdout, "local cluster stopped") {
		t.Fatalf("down: %s", r)
	}
	for _, pid := range owned {
		if framework.Alive(pid) {
			t.Errorf("process %d survived down: %s", pid, framework.Cmdline(pid))
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir %s not removed: %v", dir, err)
	}
}

// An up that cannot start (here: no control-plane binaries) says why and leaves nothing: no
// supervisor, no state directory.
func TestFailedUpLeavesNothing(t *testing.T) {
	dir := stateDir(t)
	r := run(t, []string{"BERTH_BIN_DIR=" + t.TempDir()}, berthLocal, "up", "-simulated", "-dir", dir)
	if r.code == 0 || !strings.Contains(r.stderr, "make tools") || !strings.Contains(r.stderr, "last lines of the supervisor's log") {
		t.Fatalf("up without binaries: want a non-zero exit naming `make tools` and the supervisor's log, got %s", r)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir %s left after a failed up: %v", dir, err)
	}
	for _, pid := range cluster.PIDsWithArg(dir) {
		t.Errorf("process %d left after a failed up: %s", pid, framework.Cmdline(pid))
	}
}
