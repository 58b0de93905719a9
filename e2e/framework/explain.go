package framework

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/pkg/decisionapi"
)

// WithDecisionRecord enables the DecisionRecord plugin (multiPoint, with args) in every
// profile of a KubeSchedulerConfiguration document, so a scenario's scheduler records its
// decisions. args are DecisionRecord's (records, topNodes, summary); nil keeps the defaults.
func WithDecisionRecord(config string, args map[string]any) (string, error) {
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil {
		return "", err
	}
	profiles, _ := doc["profiles"].([]any)
	if len(profiles) == 0 {
		return "", fmt.Errorf("configuration has no profiles")
	}
	for _, p := range profiles {
		prof, ok := p.(map[string]any)
		if !ok {
			return "", fmt.Errorf("profile is %T", p)
		}
		plugins, _ := prof["plugins"].(map[string]any)
		if plugins == nil {
			plugins = map[string]any{}
			prof["plugins"] = plugins
		}
		mp, _ := plugins["multiPoint"].(map[string]any)
		if mp == nil {
			mp = map[string]any{}
			plugins["multiPoint"] = mp
		}
		enabled, _ := mp["enabled"].([]any)
		mp["enabled"] = append(enabled, map[string]any{"name": "DecisionRecord"})
		if args != nil {
			pc, _ := prof["pluginConfig"].([]any)
			prof["pluginConfig"] = append(pc, map[string]any{"name": "DecisionRecord", "args": args})
		}
	}
	out, err := yaml.Marshal(doc)
	return string(out), err
}

// ExplainClient reads decision records from a scheduler's secure port on 127.0.0.1 as the
// cluster admin (the scheduler's serving certificate is its own self-signed one).
type ExplainClient struct {
	HTTP *http.Client
	Base string
}

// NewExplainClient returns a client for the scheduler serving on 127.0.0.1:port.
func NewExplainClient(c *cluster.Cluster, port int) (*ExplainClient, error) {
	hc, err := AdminLoopbackClient(c)
	if err != nil {
		return nil, err
	}
	return &ExplainClient{Base: fmt.Sprintf("https://127.0.0.1:%d%s", port, decisionapi.Path), HTTP: hc}, nil
}

// AdminCertificate is the cluster admin's client certificate.
func AdminCertificate(c *cluster.Cluster) (tls.Certificate, error) {
	cert, key, err := c.PKI.ClientCert(cluster.AdminIdentity)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(cert, key)
}

// AdminLoopbackClient is an HTTP client (5 s timeout) presenting the cluster admin's
// certificate to a component's secure port on 127.0.0.1, whose self-signed serving
// certificate it does not verify.
func AdminLoopbackClient(c *cluster.Cluster) (*http.Client, error) {
	pair, err := AdminCertificate(c)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates:       []tls.Certificate{pair},
		InsecureSkipVerify: true, //nolint:gosec // a component's self-signed loopback certificate
	}}}, nil
}

// Get returns the record of ns/name, or the scheduler's 404 explanation as an error.
func (e *ExplainClient) Get(ctx context.Context, ns, name string) (decisionapi.Record, *decisionapi.NotFound, error) {
	var rec decisionapi.Record
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Base+"?namespace="+url.QueryEscape(ns)+"&name="+url.QueryEscape(name), nil)
	if err != nil {
		return rec, nil, err
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return rec, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rec, nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return rec, nil, json.Unmarshal(body, &rec)
	case http.StatusNotFound:
		var nf decisionapi.NotFound
		if err := json.Unmarshal(body, &nf); err != nil {
			return rec, nil, fmt.Errorf("404: %s", body)
		}
		return rec, &nf, nil
	default:
		return rec, nil, fmt.Errorf("GET %s: %d %s", e.Base, resp.StatusCode, body)
	}
}

// WaitRecord polls until ns/name has a record with a final outcome (not InProgress).
func (e *ExplainClient) WaitRecord(ctx context.Context, ns, name string, timeout time.Duration) (decisionapi.Record, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		rec, nf, err := e.Get(ctx, ns, name)
		switch {
		case err != nil:
			last = err.Error()
		case nf != nil:
			last = nf.Reason + ": " + nf.Error
		case rec.Outcome != decisionapi.OutcomeInProgress:
			return rec, nil
		default:
			last = "in progress"
		}
		if time.Now().After(deadline) {
			return rec, fmt.Errorf("no final decision record for %s/%s after %s: %s", ns, name, timeout, last)
		}
		select {
		case <-ctx.Done():
			return rec, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
