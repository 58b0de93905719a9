package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/berth-sched/berth/e2e/cluster"
)

// profileSlice is the length of each CPU profile taken from a scheduler under test. The
// profile endpoint only answers at the end of its window, so a run is covered by back-to-back
// short profiles (go tool pprof merges them) instead of one long one that would outlast it.
const profileSlice = 2 * time.Second

// schedulerClient talks to a scheduler's secure port as the cluster admin (whose client
// certificate passes the port's delegated authorization).
func schedulerClient(c *cluster.Cluster) (*http.Client, error) {
	tlsCfg, err := rest.TLSConfigFor(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	// The scheduler serves a self-signed loopback certificate; only the client side matters.
	tlsCfg.InsecureSkipVerify = true //nolint:gosec
	tlsCfg.RootCAs = nil
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 30 * time.Second}, nil
}

// startProfiling pulls CPU profiles from the scheduler's /debug/pprof (served on its secure port
// behind delegated authorization; the cluster admin's client certificate passes it) into dir as
// <name>-cpu-NN.pprof until the returned function is called; that function then saves the
// block profile (the scheduler's contention profiling is on by default) and waits.
func startProfiling(ctx context.Context, c *cluster.Cluster, port int, dir, name string, logf func(string, ...any)) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	client, err := schedulerClient(c)
	if err != nil {
		return nil, err
	}
	base := fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/", port)
	get := func(ctx context.Context, path, file string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
		}
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; pctx.Err() == nil; i++ {
			secs := int(profileSlice / time.Second)
			if err := get(pctx, fmt.Sprintf("profile?seconds=%d", secs), fmt.Sprintf("%s-cpu-%02d.pprof", name, i)); err != nil && pctx.Err() == nil {
				logf("profiling %s: %v", name, err)
				return
			}
		}
	}()
	return func() {
		// The slice in flight is cut short and lost; the others cover the run.
		cancel()
		wg.Wait()
		if err := get(ctx, "block", name+"-block.pprof"); err != nil {
			logf("block profile of %s: %v", name, err)
		}
	}, nil
}

// slug turns a profile's name into a file name part.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
