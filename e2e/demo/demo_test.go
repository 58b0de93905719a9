package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// TestMain fails the package when anything its tests or the processes they started put in the
// temporary directory outlives teardown.
func TestMain(m *testing.M) { framework.RunIsolated(m) }

// TestWrongOutcomeFailsByName runs the load-aware scenario against a scheduler tampered to pack
// to 90 % instead of the seed's 40 %: the scores it records are no longer seed 001's, and the
// demo must fail naming the scenario and the seed, not print and go on.
func TestWrongOutcomeFailsByName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{Logf: t.Logf})
	var out bytes.Buffer
	tampered := false
	env := &Env{Cluster: c, Client: c.Client, Out: &out, Tamper: func(_, cfg string) string {
		if strings.Contains(cfg, "targetUtilization: 40") {
			tampered = true
		}
		return strings.Replace(cfg, "targetUtilization: 40", "targetUtilization: 90", 1)
	}}
	err := Run(ctx, env, "load-aware")
	if !tampered {
		t.Fatalf("the load-aware scenario's configuration no longer says targetUtilization: 40; the test tampers nothing")
	}
	if err == nil {
		t.Fatalf("the scenario passed with the scheduler packing to 90 %%:\n%s", out.String())
	}
	for _, want := range []string{`scenario "load-aware`, "seed 001"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	t.Logf("failed as it should: %v", err)
}
