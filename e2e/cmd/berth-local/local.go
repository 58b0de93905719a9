package main

// `berth-local up` keeps a local cluster running after it returns: it starts itself again as
// `berth-local supervise`, in a session of its own, and that supervisor owns the cluster (the
// real node's namespace forwarder and every component live in it; components die with it).
// `berth-local down` sends the supervisor SIGTERM; it stops the cluster with the same teardown
// the suites check, then exits.
//
// The state directory holds:
//
//	berth-local.lock  flock'ed by the supervisor for as long as it runs: "running" is "locked",
//	                  which a recycled pid cannot fake
//	berth-local.pid   the supervisor's pid, for down to signal
//	supervisor.log    the supervisor's log (progress and teardown)
//	cluster/          the cluster's Dir (kubeconfig, PKI, logs, the node)
//
// A pid file whose lock is free was left by a run that was killed: up and down say so, tear
// down what that run left (cluster.TeardownKilled) and go on.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
)

const (
	lockName = "berth-local.lock"
	pidName  = "berth-local.pid"
	logName  = "supervisor.log"
	// downTimeout bounds the wait for the supervisor's teardown.
	downTimeout = 3 * time.Minute
)

// Status is what the supervisor reports to `up` once the cluster is ready (the last line of
// its status pipe, after "ready ").
type Status struct {
	PID      int    `json:"pid"`
	RealNode string `json:"realNode,omitempty"`
	// RealNodes are every real node's name (RealNode is the first).
	RealNodes []string `json:"realNodes,omitempty"`
	// StartSeconds is how long the cluster took to come up, Footprint its memory then.
	StartSeconds float64 `json:"startSeconds"`
	Footprint    string  `json:"footprint,omitempty"`
	NoRealNode   string  `json:"noRealNode,omitempty"` // why the nodes are simulated
	Kubeconfig   string  `json:"kubeconfig"`
	Logs         string  `json:"logs"`
	BinDir       string  `json:"binDir"`
	// NodePools are the autoscaler's (-autoscaler), empty without one.
	NodePools  []string `json:"nodePools,omitempty"`
	CgroupName string   `json:"cgroupName,omitempty"`
	NetNSInode uint64   `json:"netnsInode,omitempty"`
}

type localOpts struct {
	dir       string
	simulated bool
	realNodes int
	// autoscaler is "" or AutoscalerKarpenter.
	autoscaler string
}

func clusterDir(dir string) string { return filepath.Join(dir, "cluster") }

// lockState opens the lock file and tries to take it: held=false means a supervisor holds it.
func lockState(dir string) (f *os.File, held bool, err error) {
	f, err = os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, false, nil
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, true, nil
}

func readPID(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, pidName))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s holds %q, not a pid", filepath.Join(dir, pidName), b)
	}
	return pid, nil
}

// whyStale explains a pid file whose lock is free.
func whyStale(pid int) string {
	if pid == 0 {
		return "no readable pid"
	}
	if syscall.Kill(pid, 0) != nil || zombie(pid) {
		return fmt.Sprintf("pid %d is not running", pid)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) < 2 || args[1] != "supervise" {
		return fmt.Sprintf("pid %d is now another program (%s), left alone", pid, strings.Join(args, " "))
	}
	return fmt.Sprintf("pid %d is a berth-local supervisor that no longer holds %s", pid, lockName)
}

// zombie: a killed supervisor whose parent (up, long gone) left it to an init that has not
// reaped it yet.
func zombie(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}

// cleanStale tears down what a killed run left in dir and removes its files (the lock holder
// calls it, so no supervisor can be using them).
func cleanStale(dir string, say func(string, ...any)) error {
	pid, _ := readPID(dir)
	_, pidErr := os.Stat(filepath.Join(dir, pidName))
	_, dirErr := os.Stat(clusterDir(dir))
	if pidErr != nil && dirErr != nil {
		return nil
	}
	if pidErr == nil {
		say("stale pid file %s from a run that was killed (%s): cleaning up what it left", filepath.Join(dir, pidName), whyStale(pid))
	} else {
		say("leftovers of an earlier run in %s (no supervisor): cleaning up", clusterDir(dir))
	}
	if err := cluster.TeardownKilled(clusterDir(dir), say); err != nil {
		return fmt.Errorf("cleaning up the killed run in %s: %w (run `berth-local down` again, or remove it by hand as root)", clusterDir(dir), err)
	}
	if err := os.RemoveAll(clusterDir(dir)); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, pidName))
	_ = os.Remove(filepath.Join(dir, logName))
	say("cleaned up")
	return nil
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "berth-local: "+format+"\n", args...)
}

// up starts the supervisor and waits until it reports the cluster ready or fails.
func up(ctx context.Context, o localOpts) error {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	lock, held, err := lockState(o.dir)
	if err != nil {
		return err
	}
	if !held {
		pid, _ := readPID(o.dir)
		return fmt.Errorf("a local cluster is already running (supervisor pid %d, kubeconfig %s): use it, or stop it with `make down`",
			pid, filepath.Join(clusterDir(o.dir), "admin.kubeconfig"))
	}
	defer lock.Close()
	if err := cleanStale(o.dir, say); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(o.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd, pr, err := startSupervisor(o, lock, logf)
	if err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Interrupting up while the cluster starts stops the supervisor too (it tears down); once
	// up returns, nothing may: main cancels ctx on its way out.
	readDone := make(chan struct{})
	defer close(readDone)
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-readDone:
		}
	}()
	st, lastErr := readStatus(pr)
	pr.Close()
	if st == nil {
		return failedStart(o, <-exited, lastErr)
	}
	printNextSteps(os.Stdout, o, st)
	return nil
}

// startSupervisor starts this binary again as `berth-local supervise`, in a session of its
// own, logging to logf, handing it the lock and the write end of the status pipe whose read
// end it returns; it records the supervisor's pid.
func startSupervisor(o localOpts, lock, logf *os.File) (*exec.Cmd, *os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	args := []string{"supervise", "-dir", o.dir, "-real-nodes", strconv.Itoa(o.realNodes)}
	if o.simulated {
		args = append(args, "-simulated")
	}
	if o.autoscaler != "" {
		args = append(args, "-autoscaler", o.autoscaler)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// fd 3: the lock (the supervisor holds it from now on), fd 4: the status pipe.
	cmd.ExtraFiles = []*os.File{lock, pw}
	// A session of its own: the terminal's Ctrl-C and hangup do not reach it after up returns.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, nil, err
	}
	pw.Close()
	if err := os.WriteFile(filepath.Join(o.dir, pidName), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	return cmd, pr, nil
}

// readStatus reads the supervisor's status pipe until it reports the cluster ready (st) or
// closes the pipe; progress lines are passed on, and lastErr is the last error it reported.
func readStatus(pr *os.File) (st *Status, lastErr string) {
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "ready "):
			st = &Status{}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "ready ")), st); err != nil {
				st, lastErr = nil, "bad status from the supervisor: "+err.Error()
			}
			if st != nil {
				return st, lastErr
			}
		case strings.HasPrefix(line, "error "):
			lastErr = strings.TrimPrefix(line, "error ")
		default:
			say("%s", line)
		}
	}
	return nil, lastErr
}

// failedStart cleans up after a supervisor that exited (werr) before the cluster was ready and
// returns the error to show, with the last lines of its log.
func failedStart(o localOpts, werr error, lastErr string) error {
	_ = os.Remove(filepath.Join(o.dir, pidName))
	tail := tailLines(filepath.Join(o.dir, logName), 20)
	if lastErr == "" {
		lastErr = fmt.Sprintf("the supervisor exited (%v) before the cluster was ready", werr)
	}
	// The supervisor stopped whatever it started; should it have died too early to do
	// so, the killed-run teardown does, before anything is removed.
	if _, err := os.Stat(clusterDir(o.dir)); err == nil {
		if err := cluster.TeardownKilled(clusterDir(o.dir), say); err != nil {
			say("cleaning up: %v", err)
		}
	}
	_ = os.RemoveAll(o.dir)
	return fmt.Errorf("%s\n--- last lines of the supervisor's log ---\n%s", lastErr, tail)
}

func tailLines(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// rel shortens p to a path relative to the working directory when it lies below it (make up
// runs from the repository root, so the printed commands read like the README's).
func rel(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	r, err := filepath.Rel(wd, p)
	if err != nil || strings.HasPrefix(r, "..") {
		return p
	}
	return r
}

// HelmLine is the README's helm install command for the local cluster (bin is the directory
// of helm): the chart's defaults, since the cluster runs DNS and the images up imported carry
// the chart's default names.
func HelmLine(bin string) string {
	return filepath.Join(bin, "helm") + " install berth charts/berth --namespace berth-system --create-namespace --wait"
}

// ExplainLine asks berth-scheduler why it placed a pod, as the chart's NOTES say: kubectl finds
// the plugin kubectl-berth in bin on PATH.
func ExplainLine(bin string) string {
	return "PATH=$PWD/" + bin + ":$PATH kubectl berth explain pod POD --scheduler-namespace berth-system --lease berth-scheduler"
}

// AddNodesLine adds simulated nodes to the running cluster (addnodes.go).
func AddNodesLine(bin string) string {
	return filepath.Join(bin, "berth-local") + " add-nodes 3 [-cpu 8] [-memory 32Gi] [-label pool=a] [-taint dedicated=a:NoSchedule]"
}

// ExampleManifest is the workload the README applies: a Deployment with schedulerName
// berth-scheduler running the pause image the node already has.
const ExampleManifest = "examples/hello-berth.yaml"

// EventsLine shows, per pod, which scheduler placed it and where.
func EventsLine(bin string) string {
	return filepath.Join(bin, "kubectl") + " get events --field-selector reason=Scheduled -o custom-columns=POD:.involvedObject.name,SCHEDULED-BY:.reportingComponent,MESSAGE:.message"
}

func printNextSteps(w *os.File, o localOpts, st *Status) {
	bin := rel(st.BinDir)
	if st.RealNode != "" {
		more := ""
		if len(st.RealNodes) > 1 {
			more = fmt.Sprintf(" and %d more (%s)", len(st.RealNodes)-1, strings.Join(st.RealNodes[1:], ", "))
		}
		fmt.Fprintf(w, "Local cluster up: real node %q%s: containerd, kubelet, kube-proxy each in a network namespace of its own, pods routed between them; Berth's images imported from %s/images.\n",
			st.RealNode, more, bin)
	} else {
		fmt.Fprintf(w, "Local cluster up with 3 SIMULATED (KWOK) nodes and berth-scheduler as a process: pods are placed, not run (%s).\n", st.NoRealNode)
	}
	fmt.Fprintf(w, "Supervisor pid %d; logs in %s and %s.\n", st.PID, rel(filepath.Join(o.dir, logName)), rel(st.Logs))
	// Budgets, printed not asserted: make up with 3 real nodes within 60 s warm, the whole
	// cluster within 3 GiB RSS.
	fmt.Fprintf(w, "Budgets: up in %.1f s (target <= 60 s warm with 3 real nodes); cluster %s (target <= 3072 MiB).\n\n", st.StartSeconds, st.Footprint)
	fmt.Fprintf(w, "  export KUBECONFIG=%s\n", st.Kubeconfig)
	if st.RealNode != "" {
		fmt.Fprintf(w, "  %s\n", HelmLine(bin))
	}
	fmt.Fprintf(w, "  %s apply -f %s\n", filepath.Join(bin, "kubectl"), ExampleManifest)
	fmt.Fprintf(w, "  %s\n", EventsLine(bin))
	if st.RealNode != "" {
		fmt.Fprintf(w, "  %s\n", ExplainLine(bin))
	}
	fmt.Fprintln(w)
	if len(st.NodePools) > 0 {
		fmt.Fprintf(w, "Karpenter runs beside the cluster (log %s) with NodePools %s: a pending pod they fit gets a simulated node, removed once empty for %s.\n",
			rel(filepath.Join(st.Logs, cluster.Karpenter+".log")), strings.Join(st.NodePools, ", "), localConsolidateAfter)
		fmt.Fprintf(w, "  %s get nodepools,nodeclaims\n", filepath.Join(bin, "kubectl"))
	}
	fmt.Fprintf(w, "Add simulated nodes: %s\n", AddNodesLine(bin))
	fmt.Fprintln(w, "Stop it with: make down")
}

// supervise runs the cluster until SIGTERM/SIGINT. fd 3 is the lock up took, fd 4 the status
// pipe up reads.
func supervise(o localOpts) error {
	lock := os.NewFile(3, lockName)
	status := os.NewFile(4, "status")
	if lock == nil || status == nil {
		return errors.New("supervise is started by `berth-local up`, not by hand")
	}
	defer lock.Close()
	// Inherited descriptors are not close-on-exec: without this every component (and the
	// shims that outlive a killed supervisor) would hold the lock and keep the pipe open.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	s := &supervisor{o: o, status: status, dir: clusterDir(o.dir)}
	start := time.Now()
	c, st, err := s.startCluster(ctx)
	if err != nil {
		return s.fail(err)
	}
	if err := s.prepare(ctx, c, &st); err != nil {
		s.stopCluster(c)
		return s.fail(err)
	}
	st.Kubeconfig, st.Logs, st.BinDir = c.Kubeconfig, filepath.Join(s.dir, "logs"), c.BinDir
	st.StartSeconds = time.Since(start).Seconds()
	st.Footprint = c.Footprint(os.Getpid()).String()
	b, _ := json.Marshal(st)
	s.logf("ready")
	s.report("ready " + string(b))
	if s.status != nil {
		s.status.Close()
		s.status = nil
	}
	<-ctx.Done()
	s.stopCluster(c)
	return nil
}

// supervisor is `berth-local supervise`: the cluster in dir, and the status pipe to up until
// the cluster is ready (nil once closed).
type supervisor struct {
	o      localOpts
	status *os.File
	dir    string
}

// report writes a line to up, while up still reads.
func (s *supervisor) report(line string) {
	if s.status != nil {
		if _, err := fmt.Fprintln(s.status, line); err != nil {
			s.status.Close()
			s.status = nil
		}
	}
}

// logf logs to the supervisor's log and reports the line to up.
func (s *supervisor) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format(time.RFC3339), msg)
	s.report(msg)
}

// fail reports err to up on one line and returns it.
func (s *supervisor) fail(err error) error {
	s.report("error " + strings.ReplaceAll(err.Error(), "\n", " | "))
	return err
}

// startCluster starts the cluster, with real nodes unless -simulated, falling back to
// simulated nodes (and saying why) when real ones cannot run here.
func (s *supervisor) startCluster(ctx context.Context) (*cluster.Cluster, Status, error) {
	st := Status{PID: os.Getpid()}
	cfg := cluster.Config{Dir: s.dir, Logf: s.logf}
	if !s.o.simulated {
		cfg.RealNode = &cluster.RealNodeConfig{ClusterDNS: true, Count: s.o.realNodes}
	} else {
		st.NoRealNode = "-simulated was asked for"
	}
	s.logf("starting the local cluster in %s", s.dir)
	c, err := cluster.Start(ctx, cfg)
	if errors.Is(err, cluster.ErrRealNodeUnavailable) {
		st.NoRealNode = err.Error()
		s.logf("NO REAL NODE: %v", err)
		s.logf("falling back to simulated (KWOK) nodes: Berth's pods cannot run on them")
		_ = os.RemoveAll(s.dir)
		cfg.RealNode = nil
		c, err = cluster.Start(ctx, cfg)
	}
	if err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, st, err
	}
	return c, st, nil
}

// prepare records the real nodes in st or, on simulated nodes, starts berth-scheduler and
// three untainted nodes; then the autoscaler, if asked for.
func (s *supervisor) prepare(ctx context.Context, c *cluster.Cluster, st *Status) error {
	if rn := c.RealNode(); rn != nil {
		st.RealNode, st.CgroupName, st.NetNSInode = rn.NodeName, rn.CgroupName, rn.NetNSInode
		for _, n := range c.RealNodes() {
			st.RealNodes = append(st.RealNodes, n.NodeName)
		}
	} else {
		// Simulated nodes run nothing: berth-scheduler runs as a process so pods still get placed.
		if _, err := c.StartBerthScheduler(ctx, cluster.BerthSchedulerOptions{}); err != nil {
			return err
		}
		// No real node beside them: the README's workloads are meant for these nodes, untainted.
		if err := c.AddNodes(ctx,
			cluster.NodeSpec{Name: "node-1", CPU: "8", Memory: "32Gi", WithoutSimulatedTaint: true},
			cluster.NodeSpec{Name: "node-2", CPU: "8", Memory: "32Gi", WithoutSimulatedTaint: true},
			cluster.NodeSpec{Name: "node-3", CPU: "8", Memory: "32Gi", WithoutSimulatedTaint: true}); err != nil {
			return err
		}
	}
	var err error
	st.NodePools, err = startAutoscaler(ctx, c, s.o.autoscaler)
	return err
}

// stopCluster stops the cluster and removes its directory and the pid file.
func (s *supervisor) stopCluster(c *cluster.Cluster) {
	start := time.Now()
	s.logf("stopping the local cluster")
	c.Stop()
	if err := os.RemoveAll(s.dir); err != nil {
		s.logf("removing %s: %v", s.dir, err)
	}
	_ = os.Remove(filepath.Join(s.o.dir, pidName))
	s.logf("stopped in %s", time.Since(start).Round(100*time.Millisecond))
}

// down stops the running supervisor (or cleans up after a killed one).
func down(o localOpts) error {
	if _, err := os.Stat(o.dir); os.IsNotExist(err) {
		fmt.Printf("no local cluster running (nothing in %s)\n", o.dir)
		return nil
	}
	lock, held, err := lockState(o.dir)
	if err != nil {
		return err
	}
	if held {
		// No supervisor: either nothing runs, or a killed run left its state.
		_, pidErr := os.Stat(filepath.Join(o.dir, pidName))
		_, dirErr := os.Stat(clusterDir(o.dir))
		if pidErr != nil && dirErr != nil {
			lock.Close()
			_ = os.RemoveAll(o.dir)
			fmt.Printf("no local cluster running (nothing in %s)\n", o.dir)
			return nil
		}
		err := cleanStale(o.dir, say)
		lock.Close()
		if err != nil {
			return err
		}
		fmt.Println("no local cluster was running; the killed run's leftovers are removed")
		return os.RemoveAll(o.dir)
	}
	pid, err := readPID(o.dir)
	if err != nil {
		return fmt.Errorf("a supervisor holds %s but its pid is unknown (%v): is `up` still starting? try again", filepath.Join(o.dir, lockName), err)
	}
	start := time.Now()
	fmt.Printf("stopping the local cluster (supervisor pid %d)\n", pid)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("signalling the supervisor %d: %w", pid, err)
	}
	deadline := time.Now().Add(downTimeout)
	for {
		l, held, err := lockState(o.dir)
		if err != nil {
			return err
		}
		if held {
			l.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the supervisor (pid %d) did not finish its teardown within %s; see %s", pid, downTimeout, filepath.Join(o.dir, logName))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The lock goes as the supervisor returns; its process ends a moment later. "Stopped"
	// means nothing of it runs any more.
	for syscall.Kill(pid, 0) == nil && !zombie(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Print(indent(tailAfter(filepath.Join(o.dir, logName), "stopping the local cluster")))
	if err := os.RemoveAll(o.dir); err != nil {
		return err
	}
	fmt.Printf("local cluster stopped in %s; nothing left in %s\n", time.Since(start).Round(100*time.Millisecond), o.dir)
	return nil
}

// tailAfter returns the log from the last line containing marker (the teardown's messages).
func tailAfter(path, marker string) string {
	b, _ := os.ReadFile(path)
	s := string(b)
	if i := strings.LastIndex(s, marker); i >= 0 {
		if j := strings.LastIndex(s[:i], "\n"); j >= 0 {
			return s[j+1:]
		}
		return s
	}
	return ""
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
