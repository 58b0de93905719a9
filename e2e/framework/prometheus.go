package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Prometheus reads a real Prometheus' HTTP API at URL. Client, if set, is used instead of
// http.DefaultClient (e.g. one dialing into a node's network namespace).
type Prometheus struct {
	URL    string
	Client *http.Client
}

// Sample is one series of an instant vector.
type Sample struct {
	Metric map[string]string
	Value  float64
}

func (p *Prometheus) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return err
	}
	hc := p.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

// Query evaluates an instant vector query now.
func (p *Prometheus) Query(ctx context.Context, q string) ([]Sample, error) {
	var r struct {
		Data struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		return nil, err
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: result type %q, want vector", q, r.Data.ResultType)
	}
	var out []Sample
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v: %w", q, s.Value[1], err)
		}
		out = append(out, Sample{Metric: s.Metric, Value: v})
	}
	return out, nil
}

// AlertState is "", "pending" or "firing" (the most advanced of the alert's instances).
func (p *Prometheus) AlertState(ctx context.Context, name string) string {
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/alerts", &r); err != nil {
		return "error: " + err.Error()
	}
	state := ""
	for _, a := range r.Data.Alerts {
		if a.Labels["alertname"] == name && (state == "" || a.State == "firing") {
			state = a.State
		}
	}
	return state
}

// WaitFiring returns when the alert was first seen pending and first seen firing; seeing it
// firing without a pending phase is an error (its `for` would have been skipped).
func (p *Prometheus) WaitFiring(ctx context.Context, name string, timeout time.Duration) (pending, firing time.Time, err error) {
	err = Poll(ctx, timeout, func() (bool, string) {
		s := p.AlertState(ctx, name)
		now := time.Now()
		switch s {
		case "pending":
			if pending.IsZero() {
				pending = now
			}
		case "firing":
			firing = now
			return true, ""
		}
		return false, "alert state " + strconv.Quote(s)
	})
	if err != nil {
		return pending, firing, fmt.Errorf("%s never fired: %w", name, err)
	}
	if pending.IsZero() {
		return pending, firing, fmt.Errorf("%s fired without being seen pending first", name)
	}
	return pending, firing, nil
}

// Targets is Prometheus' view of its targets, for failure messages.
func (p *Prometheus) Targets(ctx context.Context) string {
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/targets", &r); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, t := range r.Data.ActiveTargets {
		fmt.Fprintf(&b, "\n  %s %s %s", t.ScrapeURL, t.Health, t.LastError)
	}
	return b.String()
}

// Poll calls f every 200 ms until it says done, timeout passes or ctx ends; the error carries
// f's last reason.
func Poll(ctx context.Context, timeout time.Duration, f func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, why := f()
		if ok {
			return nil
		}
		last = why
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
