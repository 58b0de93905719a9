package berthctl

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// forbiddingAPIServer answers every request as an API server answers a caller without RBAC.
func forbiddingAPIServer(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: User \"dev\" cannot %s","reason":"Forbidden","code":403}`, r.URL.Path)
	}))
	t.Cleanup(ts.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, ts.URL)
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestMainExitCodes: bad usage is 2; every refusal is one "error:" sentence and 1, never a
// stack trace.
func TestMainExitCodes(t *testing.T) {
	kc := forbiddingAPIServer(t)
	berth := realWatcher(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"timestamp":1,"window":{"duration":"15m"},"source":"Prometheus","data":{"NodeMetricsMap":{"n":{"metrics":[]}}}}`))
	}))
	defer upstream.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"nodes without RBAC on nodes", []string{"nodes", "--kubeconfig", kc, "--watcher-url", berth.URL}, 1, "error: you may not list nodes: bind the chart's <release>-berthctl-reader ClusterRole"},
		{"nodes without RBAC to find the watcher", []string{"nodes", "--kubeconfig", kc}, 1, "error: you may not list services in berth-system (to find the load watcher)"},
		{"nodes against another vendor's watcher", []string{"nodes", "--kubeconfig", kc, "--watcher-url", upstream.URL}, 1, "is not Berth's load watcher (it serves the upstream load-watcher document without berthNodes)"},
		{"nodes, watcher down", []string{"nodes", "--kubeconfig", kc, "--watcher-url", "http://127.0.0.1:1", "--request-timeout", "5s"}, 1, "error: reading /watcher from load watcher 127.0.0.1:1"},
		{"status without RBAC", []string{"status", "--kubeconfig", kc}, 1, "error: you may not get Lease berth-scheduler"},
		{"bad sort key", []string{"nodes", "--sort-by", "size"}, 2, `--sort-by "size": want one of name, cpu`},
		{"bad output", []string{"status", "-o", "xml"}, 2, "--output must be table, wide, json or yaml"},
		{"stray argument", []string{"nodes", "node-1"}, 2, "takes no arguments"},
		{"bad watcher url", []string{"nodes", "--kubeconfig", kc, "--watcher-url", "ftp://x"}, 1, `--watcher-url "ftp://x": want http://host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), tc.code, tc.want)
			}
			if strings.Contains(errb.String(), "goroutine ") || strings.Contains(errb.String(), "panic") {
				t.Fatalf("stack trace on stderr: %s", errb.String())
			}
			if code == 1 && strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
				t.Errorf("want one line, got %q", errb.String())
			}
		})
	}
}
