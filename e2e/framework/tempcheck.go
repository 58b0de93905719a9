package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-sched/berth/e2e/cluster"
)

// IsolateTemp points TMPDIR at a fresh private directory for this test binary and every process
// it starts, so that what the suite leaves behind can be told apart from what suites running in
// parallel create. Call it first in TestMain and call the returned check last, after the
// cluster has stopped: it fails if any berth-* entry is left (a cluster directory, a scheduler's
// default configuration, a fixture /proc), then restores TMPDIR and removes the directory.
//
//	check := framework.IsolateTemp()
//	... start, m.Run(), stop ...
//	if err := check(); err != nil { fmt.Fprintln(os.Stderr, err); code = 1 }
func IsolateTemp() (check func() error) {
	old, had := os.LookupEnv("TMPDIR")
	dir, err := os.MkdirTemp("", "berth-e2e-")
	if err != nil {
		return func() error { return fmt.Errorf("isolating the temporary directory: %w", err) }
	}
	os.Setenv("TMPDIR", dir)
	return func() error {
		if had {
			os.Setenv("TMPDIR", old)
		} else {
			os.Unsetenv("TMPDIR")
		}
		left := BerthTempEntries(dir)
		_ = os.RemoveAll(dir)
		if len(left) > 0 {
			return fmt.Errorf("left behind in the temporary directory: %s (teardown must remove them)", strings.Join(left, ", "))
		}
		return nil
	}
}

// BerthTempEntries lists dir's entries named berth-*, with what is inside each (a few paths),
// sorted.
func BerthTempEntries(dir string) []string {
	matches, _ := filepath.Glob(filepath.Join(dir, "berth-*"))
	sort.Strings(matches)
	out := make([]string, 0, len(matches))
	for _, m := range matches {
		var inside []string
		_ = filepath.WalkDir(m, func(p string, d os.DirEntry, err error) error {
			if err == nil && p != m && len(inside) < 3 {
				rel, _ := filepath.Rel(m, p)
				inside = append(inside, rel)
			}
			return nil
		})
		desc := filepath.Base(m)
		if len(inside) > 0 {
			desc += " [" + strings.Join(inside, " ") + "]"
		}
		out = append(out, desc)
	}
	return out
}

// RunIsolated is a suite's whole TestMain when it needs nothing else: it runs the tests with
// IsolateTemp and exits non-zero if they failed or left anything named berth-* behind.
func RunIsolated(m interface{ Run() int }) {
	quietControllerRuntime()
	check := IsolateTemp()
	code := m.Run()
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// RunWithCluster is the TestMain of a suite whose tests share one local cluster: in a private
// temporary directory it starts the cluster with cfg (bounded by timeout), hands it to set, runs
// the tests, stops the cluster, and exits non-zero if the tests failed, the cluster did not
// start, or anything named berth-* was left behind.
func RunWithCluster(m interface{ Run() int }, cfg cluster.Config, timeout time.Duration, set func(*cluster.Cluster)) {
	quietControllerRuntime()
	check := IsolateTemp()
	code := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		c, err := cluster.Start(ctx, cfg)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "starting the local cluster:", err)
			return 1
		}
		defer c.Stop()
		set(c)
		return m.Run()
	}()
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// quietControllerRuntime gives controller-runtime a logger that drops everything: the suites'
// clients log nothing worth reading, and without a logger controller-runtime prints a goroutine
// stack ("log.SetLogger(...) was never called") that reads like a panic in CI output.
func quietControllerRuntime() { ctrllog.SetLogger(logr.Discard()) }
