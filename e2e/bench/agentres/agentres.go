// Package agentres measures berth-agent's footprint: it runs bin/berth-agent on a fixture /proc
// with --watch-pods=false, pushing to a loopback sink, and samples the process's resident set
// (VmRSS in /proc/<pid>/status) and CPU time (utime+stime in /proc/<pid>/stat) every interval.
package agentres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
)

// ClockTicks is USER_HZ, the unit of utime/stime: 100 on every Linux architecture Go supports
// (the kernel exports CONFIG_HZ-independent USER_HZ=100).
const ClockTicks = 100

// Options of one measurement.
type Options struct {
	Binary         string        // bin/berth-agent
	Duration       time.Duration // 60s
	Interval       time.Duration // sampling period of the harness, 1s
	SampleInterval time.Duration // agent --sample-interval, 1s (its default)
	ReportInterval time.Duration // agent --report-interval, 15s (its default)
	CPU, Memory    float64       // fixture load
}

// Sample is one reading of the process.
type Sample struct {
	At       time.Duration // since start
	RSSKiB   int64
	CPUTicks int64 // utime+stime, cumulative
}

// Result of a run.
type Result struct {
	Options Options
	Samples []Sample
	Reports int64 // POSTs the sink received
}

// Run starts the agent, samples it for o.Duration, stops it and returns the readings.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Binary == "" {
		return nil, errors.New("agentres: no agent binary")
	}
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("agentres: %w (run `make build`)", err)
	}
	if o.Interval <= 0 || o.Duration < o.Interval {
		return nil, fmt.Errorf("agentres: interval %s and duration %s: want 0 < interval <= duration", o.Interval, o.Duration)
	}
	dir, err := os.MkdirTemp("", "agentres-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fx, err := fixture.New(filepath.Join(dir, "proc"), o.CPU, o.Memory)
	if err != nil {
		return nil, err
	}
	fctx, stopFixture := context.WithCancel(ctx)
	defer stopFixture()
	go func() { _ = fx.Run(fctx, o.SampleInterval/4) }()

	var reports atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		reports.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("bench"), 0o600); err != nil {
		return nil, err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, o.Binary, "--node-name=bench-node", "--proc-root="+fx.Root, "--watcher-url="+sink.URL,
		"--token-file="+token, "--listen=127.0.0.1:"+strconv.Itoa(port), "--watch-pods=false",
		"--sample-interval="+o.SampleInterval.String(), "--report-interval="+o.ReportInterval.String())
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	// Killed with us if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid

	res := &Result{Options: o}
	start := time.Now()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for time.Since(start) < o.Duration {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		s, err := Read(pid)
		if err != nil {
			return nil, fmt.Errorf("agent pid %d: %w", pid, err)
		}
		s.At = time.Since(start)
		res.Samples = append(res.Samples, s)
	}
	res.Reports = reports.Load()
	return res, nil
}

// Read samples /proc/<pid>/status VmRSS and /proc/<pid>/stat utime+stime.
func Read(pid int) (Sample, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Sample{}, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Sample{}, err
	}
	rss, err := ParseVmRSS(string(status))
	if err != nil {
		return Sample{}, err
	}
	ticks, err := ParseCPUTicks(string(stat))
	if err != nil {
		return Sample{}, err
	}
	return Sample{RSSKiB: rss, CPUTicks: ticks}, nil
}

// ParseVmRSS returns the VmRSS line of /proc/<pid>/status in KiB.
func ParseVmRSS(status string) (int64, error) {
	for _, l := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("malformed VmRSS line %q", l)
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, errors.New("no VmRSS line (kernel thread or zombie?)")
}

// ParseCPUTicks returns utime+stime (fields 14 and 15) of /proc/<pid>/stat. The command name
// (field 2) may hold spaces and parentheses, so fields are counted after the last ')'.
func ParseCPUTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed stat: no ')'")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14 → f[11], stime field 15 → f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed stat: %d fields after the command", len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	s, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return u + s, nil
}

// Summary of a run.
type Summary struct {
	RSSMinKiB, RSSMaxKiB, RSSLastKiB int64
	RSSAvgKiB                        float64
	CPUSeconds                       float64 // over the measured span
	CPUPercent                       float64 // of one core, average
	CPUPercentMaxInterval            float64 // busiest interval
	Span                             time.Duration
}

// Summarize computes the table's figures; it needs at least two samples.
func Summarize(r *Result) (Summary, error) {
	n := len(r.Samples)
	if n < 2 {
		return Summary{}, fmt.Errorf("%d samples: need at least 2", n)
	}
	s := Summary{RSSMinKiB: r.Samples[0].RSSKiB, RSSMaxKiB: r.Samples[0].RSSKiB, RSSLastKiB: r.Samples[n-1].RSSKiB}
	var sum int64
	for _, x := range r.Samples {
		sum += x.RSSKiB
		s.RSSMinKiB = min(s.RSSMinKiB, x.RSSKiB)
		s.RSSMaxKiB = max(s.RSSMaxKiB, x.RSSKiB)
	}
	s.RSSAvgKiB = float64(sum) / float64(n)
	first, last := r.Samples[0], r.Samples[n-1]
	s.Span = last.At - first.At
	s.CPUSeconds = float64(last.CPUTicks-first.CPUTicks) / ClockTicks
	if s.Span > 0 {
		s.CPUPercent = 100 * s.CPUSeconds / s.Span.Seconds()
	}
	var per []float64
	for i := 1; i < n; i++ {
		dt := (r.Samples[i].At - r.Samples[i-1].At).Seconds()
		if dt > 0 {
			per = append(per, 100*float64(r.Samples[i].CPUTicks-r.Samples[i-1].CPUTicks)/ClockTicks/dt)
		}
	}
	sort.Float64s(per)
	if len(per) > 0 {
		s.CPUPercentMaxInterval = per[len(per)-1]
	}
	return s, nil
}
