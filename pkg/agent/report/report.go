// Package report builds the agent's load reports and pushes them to the load watcher.
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/berth-sched/berth/pkg/agent/load"
	"github.com/berth-sched/berth/pkg/loadapi"
	"k8s.io/klog/v2"
)

// Build turns the sampler's state into a report. ok is false when there is no sample yet.
func Build(node string, s *load.Sampler, now time.Time, podUIDs []string) (loadapi.Report, bool) {
	r, _, ok := BuildCounted(node, s, now, podUIDs)
	return r, ok
}

// BuildCounted is Build that also returns how many values it had to clamp into [0,100] % (or
// replace, when not finite): the watcher refuses a report with any value outside, so they are
// clamped here and counted (berth_agent_values_clamped_total).
func BuildCounted(node string, s *load.Sampler, now time.Time, podUIDs []string) (r loadapi.Report, clamped int, ok bool) {
	last, ok := s.Last()
	if !ok {
		return loadapi.Report{}, 0, false
	}
	var c clamper
	pct := c.pct
	r = loadapi.Report{
		Node:    node,
		Time:    last.Time.Unix(),
		Latest:  loadapi.Latest{CPU: pct(last.CPU), Memory: pct(last.Memory)},
		PodUIDs: podUIDs,
	}
	stats := s.Stats(now)
	for i, w := range s.WindowLengths() {
		st := stats[w]
		if st.CPU.N == 0 {
			continue // no samples in the window: say nothing rather than zero
		}
		r.Windows = append(r.Windows, loadapi.WindowReport{
			Window:  loadapi.WindowNames[i],
			Samples: st.CPU.N,
			CPU:     loadapi.ResourceStats{Avg: pct(st.CPU.Avg), Std: pct(st.CPU.Std), P95: pct(st.CPU.P95)},
			Memory:  loadapi.ResourceStats{Avg: pct(st.Memory.Avg), Std: pct(st.Memory.Std), P95: pct(st.Memory.P95)},
		})
	}
	if len(r.Windows) == 0 {
		return loadapi.Report{}, 0, false
	}
	r.Pods = podUsage(s, now, podUIDs, stats, &c)
	return r, c.n, true
}

// podUsage is the per-pod part of a report: the listed pods the sampler read at its newest
// sample, at most loadapi.MaxPods, with the same windows as the node.
func podUsage(s *load.Sampler, now time.Time, podUIDs []string, stats map[time.Duration]load.WindowStats, c *clamper) []loadapi.PodUsage {
	ps := s.PodStats(now)
	if len(ps) == 0 || len(podUIDs) == 0 {
		return nil
	}
	listed := make(map[string]struct{}, len(podUIDs))
	for _, uid := range podUIDs {
		listed[uid] = struct{}{}
	}
	out := make([]loadapi.PodUsage, 0, min(len(ps), loadapi.MaxPods))
	for _, p := range ps {
		if _, ok := listed[p.UID]; !ok || len(out) == loadapi.MaxPods {
			continue // a pod the report does not list must not be in it (the watcher refuses that)
		}
		u := loadapi.PodUsage{UID: p.UID, Latest: loadapi.Latest{CPU: c.pct(p.Latest.CPU), Memory: c.pct(p.Latest.Memory)},
			CPUMillicores: max(p.MilliCPU, 0), MemoryBytes: int64(min(p.MemoryBytes, math.MaxInt64))}
		for i, w := range s.WindowLengths() {
			if stats[w].CPU.N == 0 {
				continue // as for the node: no window without samples
			}
			u.Windows = append(u.Windows, loadapi.PodWindow{Window: loadapi.WindowNames[i], CPU: c.pct(p.CPU[i]), Memory: c.pct(p.Memory[i])})
		}
		out = append(out, u)
	}
	return out
}

// clamper clamps percentages and counts the values it changed.
type clamper struct{ n int }

func (c *clamper) pct(v float64) float64 {
	out := clampPct(v)
	if out != v || math.IsNaN(v) {
		c.n++
	}
	return out
}

// clampPct keeps floating-point noise (100.00000000001) from getting a report refused; a value
// that is not a number becomes 0 (the watcher would refuse the whole report for it).
func clampPct(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return min(max(v, 0), 100)
}

// Pusher POSTs reports to the load watcher with the service-account token.
type Pusher struct {
	// URL is the watcher's base URL; reports go to URL + loadapi.ReportPath.
	URL       string
	TokenFile string
	Client    *http.Client
	// InitialBackoff and MaxBackoff bound the retry delays (doubling, with jitter).
	InitialBackoff, MaxBackoff time.Duration
	// OnAttempt, if set, sees the result of every attempt ("ok", "retry", "refused").
	OnAttempt func(result string)

	sleep func(ctx context.Context, d time.Duration) error
}

// PermanentError is a refusal that retrying cannot fix (bad report, wrong identity).
type PermanentError struct {
	Status int
	Body   string
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("watcher refused the report: %d %s", e.Status, e.Body)
}

// Push sends r, retrying transient failures with backoff until it succeeds, the watcher refuses
// it for good, or ctx ends (the caller bounds ctx by the report interval, since a newer report
// supersedes this one).
func (p *Pusher) Push(ctx context.Context, r *loadapi.Report) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	backoff := p.InitialBackoff
	if backoff <= 0 {
		backoff = 500 * time.Millisecond
	}
	maxBackoff := p.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = 10 * time.Second
	}
	sleep := p.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	for attempt := 1; ; attempt++ {
		err := p.once(ctx, body)
		var perm *PermanentError
		switch {
		case err == nil:
			p.attempt("ok")
			return nil
		case errors.As(err, &perm):
			p.attempt("refused")
			return err
		}
		p.attempt("retry")
		// Full jitter in [d/2, d): thousands of agents restarted together do not retry in step.
		d := backoff/2 + rand.N(backoff/2+1)
		klog.FromContext(ctx).Info("Pushing load report failed, retrying", "attempt", attempt, "in", d, "err", err.Error())
		if serr := sleep(ctx, d); serr != nil {
			return fmt.Errorf("giving up after %d attempts: %w", attempt, err)
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func (p *Pusher) attempt(result string) {
	if p.OnAttempt != nil {
		p.OnAttempt(result)
	}
}

func (p *Pusher) once(ctx context.Context, body []byte) error {
	// Re-read on every attempt: projected tokens are rotated by the kubelet.
	tok, err := os.ReadFile(p.TokenFile)
	if err != nil {
		return fmt.Errorf("reading token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(p.URL, "/")+loadapi.ReportPath, bytes.NewReader(body))
	if err != nil {
		return &PermanentError{Status: 0, Body: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	c := p.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	// 401: the token may just have rotated under us or the review cache is cold; 429/5xx: the
	// watcher or the API server behind its TokenReview is overloaded or restarting.
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return fmt.Errorf("watcher answered %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
	default:
		return &PermanentError{Status: resp.StatusCode, Body: strings.TrimSpace(string(msg))}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SortedUIDs returns a sorted copy (stable report bodies make logs and tests comparable).
func SortedUIDs(uids []string) []string {
	out := slices.Clone(uids)
	slices.Sort(out)
	return out
}
