package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrMissingBinary is wrapped by errors about a component binary that is not built.
var ErrMissingBinary = errors.New("binary not found")

// ProcessSpec describes one component process.
type ProcessSpec struct {
	// Name of the component; it names the log file and every error about the process.
	Name   string
	Binary string
	Args   []string
	Env    []string
	// Detach leaves the process running after this program exits (make up). Otherwise the
	// kernel kills it when the program dies, so an interrupted test leaves nothing behind.
	Detach bool
}

// Process is a running component.
type Process struct {
	Name    string
	LogPath string
	PIDFile string

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// StartProcess starts spec with its output in logDir/<name>.log and its pid in
// logDir/<name>.pid (so a later `down` can stop a detached cluster).
func StartProcess(spec ProcessSpec, logDir string) (*Process, error) {
	if _, err := os.Stat(spec.Binary); err != nil {
		return nil, fmt.Errorf("%s: %w at %s: run `make tools` (control plane) or `make build` (Berth) first", spec.Name, ErrMissingBinary, spec.Binary)
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, spec.Name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.Binary, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group, so Stop reaches whatever the component forks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: starting %s: %w", spec.Name, spec.Binary, err)
	}
	p := &Process{Name: spec.Name, LogPath: logPath, cmd: cmd, log: f, done: make(chan struct{}),
		PIDFile: filepath.Join(logDir, spec.Name+".pid")}
	_ = os.WriteFile(p.PIDFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// PID of the process.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Done is closed when the process ends.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop ends the process group: SIGTERM, a second SIGTERM after grace (kube-apiserver waits in
// graceful shutdown for over 30s after the first), then SIGKILL.
func (p *Process) Stop(grace time.Duration) {
	defer os.Remove(p.PIDFile)
	stopGroup(p.cmd.Process.Pid, p.done, grace)
}

// Kill ends the process group with SIGKILL at once, as a crash would.
func (p *Process) Kill() {
	defer os.Remove(p.PIDFile)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func stopGroup(pid int, done <-chan struct{}, grace time.Duration) {
	signals := []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGKILL}
	for _, sig := range signals {
		_ = syscall.Kill(-pid, sig)
		select {
		case <-done:
			// The leader is gone; make sure nothing it forked outlives it.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return
		case <-time.After(grace):
		}
	}
	<-done
}

// StopPIDFile stops a detached process recorded in a pid file by a previous run.
func StopPIDFile(path string, grace time.Duration) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("%s: not a pid: %q", path, b)
	}
	done := make(chan struct{})
	go func() {
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(50 * time.Millisecond)
		}
		close(done)
	}()
	stopGroup(pid, done, grace)
	return os.Remove(path)
}

// Tail returns the last n lines of the process log.
func (p *Process) Tail(n int) string { return tailFile(p.LogPath, n) }

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// ComponentError names the component that failed and carries the tail of its log.
type ComponentError struct {
	Component string
	Err       error
	LogPath   string
	LogTail   string
}

func (e *ComponentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v", e.Component, e.Err)
	if e.LogTail != "" {
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", e.LogPath, e.LogTail)
	}
	return b.String()
}

func (e *ComponentError) Unwrap() error { return e.Err }

// WaitReady polls check until it succeeds, the process exits, or timeout passes.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-p.done:
			_, err := p.Exited()
			return &ComponentError{Component: p.Name, Err: fmt.Errorf("exited before becoming ready (%v)", err),
				LogPath: p.LogPath, LogTail: p.Tail(30)}
		case <-ctx.Done():
			return &ComponentError{Component: p.Name, Err: fmt.Errorf("not ready after %s: %v", timeout, last),
				LogPath: p.LogPath, LogTail: p.Tail(30)}
		case <-tick.C:
		}
	}
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// checkPortFree fails with a clear message when a fixed port is taken.
func checkPortFree(component string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return &ComponentError{Component: component, Err: fmt.Errorf("port 127.0.0.1:%d is already in use; choose another port or stop what listens there: %w", port, err)}
	}
	return l.Close()
}
