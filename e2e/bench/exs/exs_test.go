package exs

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestSyntheticProfiles(t *testing.T) {
	a, b := SyntheticProfiles(10, 7), SyntheticProfiles(10, 7)
	for i := range a {
		seen := map[string]bool{}
		for _, s := range a[i].Syscalls {
			if seen[s] {
				t.Fatalf("%s lists %s twice", a[i].Name, s)
			}
			seen[s] = true
		}
		if n := len(a[i].Syscalls); n < 60 || n > 250 {
			t.Errorf("%s has %d syscalls, want 60–250", a[i].Name, n)
		}
		if strings.Join(a[i].Syscalls, ",") != strings.Join(b[i].Syscalls, ",") {
			t.Errorf("%s differs between two calls with the same seed", a[i].Name)
		}
	}
}

func TestOptionsRejectEmptyWorkload(t *testing.T) {
	if _, err := Execute(context.Background(), Options{Nodes: 2, Pods: 0, Profiles: 1}); err == nil {
		t.Fatal("Execute accepted zero pods")
	}
}

// TestHarnessSmall runs the whole harness at a small size against the real control plane and
// berth-scheduler. It checks that every pod was placed on a real node in both configurations
// and that each figure is the ExS of that placement; which configuration wins is the figure
// the harness reports, not something to assert.
func TestHarnessSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o := Options{Nodes: 3, Pods: 12, Profiles: 3, Seed: 1, DaemonSets: 1, Logf: t.Logf}
	res, err := Execute(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != len(configs) {
		t.Fatalf("%d runs, want %d", len(res.Runs), len(configs))
	}
	nodes := map[string]bool{"exs-node-00": true, "exs-node-01": true, "exs-node-02": true}
	sets := map[string]map[string]bool{}
	for _, p := range res.Profiles {
		sets[p.Name] = map[string]bool{}
		for _, s := range p.Syscalls {
			sets[p.Name][s] = true
		}
	}
	for _, run := range res.Runs {
		if len(run.Placement) != o.Pods {
			t.Errorf("%s placed %d pods, want %d", run.Config, len(run.Placement), o.Pods)
		}
		// The figure recomputed here with plain maps, independently of sysched.ClusterExS.
		union := map[string]map[string]bool{}
		for pod, node := range run.Placement {
			if !nodes[node] {
				t.Errorf("%s: pod %s on unknown node %q", run.Config, pod, node)
			}
			if union[node] == nil {
				union[node] = map[string]bool{}
			}
			for s := range sets[res.PodProfile[pod]] {
				union[node][s] = true
			}
		}
		want := 0
		for pod, node := range run.Placement {
			want += len(union[node]) - len(sets[res.PodProfile[pod]])
		}
		if run.ExS != want {
			t.Errorf("%s: ExS %d, recomputed %d", run.Config, run.ExS, want)
		}
	}
	var out strings.Builder
	res.Print(&out)
	if !strings.Contains(out.String(), "SySched") || !strings.Contains(out.String(), "default plugins") {
		t.Errorf("table lacks a configuration:\n%s", out.String())
	}
	t.Log("\n" + out.String())
}
