package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a stubborn child process: it ignores the first SIGTERM (like
// kube-apiserver in graceful shutdown) and forks a grandchild into its process group.
func TestMain(m *testing.M) {
	switch os.Getenv("BERTH_CLUSTER_TEST_CHILD") {
	case "stubborn":
		if os.Getenv("BERTH_CLUSTER_TEST_GRANDCHILD") == "" {
			gc := exec.Command(os.Args[0])
			gc.Env = append(os.Environ(), "BERTH_CLUSTER_TEST_GRANDCHILD=1")
			_ = gc.Start()
			fmt.Printf("grandchild %d\n", gc.Process.Pid)
		}
		sigs := make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGTERM)
		<-sigs
		fmt.Println("ignoring first SIGTERM")
		<-sigs
		os.Exit(0)
	case "crash":
		fmt.Println("fatal: cannot bind 127.0.0.1:1: address already in use")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie still answers signal 0; it is dead for our purposes.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func TestStopEscalatesAndReachesTheGroup(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProcess(ProcessSpec{Name: "stubborn", Binary: os.Args[0], Env: []string{"BERTH_CLUSTER_TEST_CHILD=stubborn"}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	deadline := time.Now().Add(10 * time.Second)
	for grandchild == 0 && time.Now().Before(deadline) {
		fmt.Sscanf(p.Tail(5), "grandchild %d", &grandchild)
		time.Sleep(20 * time.Millisecond)
	}
	if grandchild == 0 {
		t.Fatalf("child never reported its grandchild; log: %s", p.Tail(5))
	}
	if _, err := os.Stat(p.PIDFile); err != nil {
		t.Fatalf("no pid file: %v", err)
	}
	p.Stop(300 * time.Millisecond)
	if exited, _ := p.Exited(); !exited {
		t.Fatal("process still running after Stop")
	}
	if !strings.Contains(p.Tail(5), "ignoring first SIGTERM") {
		t.Errorf("the first SIGTERM should have been sent and ignored; log: %s", p.Tail(5))
	}
	time.Sleep(100 * time.Millisecond)
	if alive(grandchild) {
		t.Errorf("grandchild %d outlived Stop", grandchild)
	}
	if _, err := os.Stat(p.PIDFile); !os.IsNotExist(err) {
		t.Errorf("pid file left behind: %v", err)
	}
}

func TestWaitReadyReportsCrashWithLogTail(t *testing.T) {
	p, err := StartProcess(ProcessSpec{Name: "crashy", Binary: os.Args[0], Env: []string{"BERTH_CLUSTER_TEST_CHILD=crash"}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(context.Background(), 10*time.Second, func(context.Context) error { return errors.New("not yet") })
	var ce *ComponentError
	if !errors.As(err, &ce) {
		t.Fatalf("want a ComponentError, got %v", err)
	}
	if ce.Component != "crashy" || !strings.Contains(err.Error(), "exited before becoming ready") ||
		!strings.Contains(err.Error(), "address already in use") {
		t.Errorf("error should name the component, say it exited and show its log; got:\n%v", err)
	}
}

func TestStartProcessMissingBinaryNamesTheFix(t *testing.T) {
	_, err := StartProcess(ProcessSpec{Name: "etcd", Binary: filepath.Join(t.TempDir(), "etcd")}, t.TempDir())
	if !errors.Is(err, ErrMissingBinary) || !strings.Contains(err.Error(), "make tools") || !strings.HasPrefix(err.Error(), "etcd:") {
		t.Errorf("got %v", err)
	}
}

func TestStopPIDFileStopsDetachedProcess(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProcess(ProcessSpec{Name: "stubborn", Binary: os.Args[0], Detach: true,
		Env: []string{"BERTH_CLUSTER_TEST_CHILD=stubborn", "BERTH_CLUSTER_TEST_GRANDCHILD=1"}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.PID()
	if err := StopPIDFile(p.PIDFile, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if alive(pid) {
		t.Errorf("detached process %d still alive", pid)
	}
}
