package placement

import (
	"fmt"
	"testing"
)

func TestReliefWorkloads(t *testing.T) {
	o := ReliefOptions{Seed: 7}
	o.defaults()
	a, b := reliefWorkloads(o), reliefWorkloads(o)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("same seed, different workloads")
	}
	if other := reliefWorkloads(ReliefOptions{Seed: 8, Workloads: 40, Shift: 0.25}); fmt.Sprint(other) == fmt.Sprint(a) {
		t.Fatal("another seed, same workloads")
	}
	var shifted, pdb, over140 int
	for _, w := range a {
		if w.before != 30 {
			t.Fatalf("%s uses %v %% before the shift, want 30", w.name, w.before)
		}
		if w.after != w.before {
			shifted++
			if w.after < 100 || w.after > 150 {
				t.Fatalf("%s shifted to %v %%, want 100-150", w.name, w.after)
			}
			if w.after > 140 {
				over140++
			}
		}
		if w.pdb {
			pdb++
		}
	}
	if shifted != 10 || pdb != 4 {
		t.Fatalf("%d shifted (want 25 %% of 40 = 10), %d with a PDB (want 4)", shifted, pdb)
	}
	t.Logf("%d of the shifted above 140 %%", over140)
}

func TestReliefEventParsing(t *testing.T) {
	msg := "round 12: node relief-03 cpu at 92% above the high threshold 80% for 2 rounds; pod uses 25.0% of the node (requests, no per-pod measurement); w-07-x9z fits on cold node relief-11 (cpu would be 30%)"
	if n, ok := reliefRound(msg); !ok || n != 12 {
		t.Fatalf("round %d %v", n, ok)
	}
	if f := reliefFrom(msg); f != "relief-03" {
		t.Fatalf("from %q", f)
	}
	if o := reliefOwner("w-07-x9z2k"); o != "w-07" {
		t.Fatalf("owner %q", o)
	}
	if _, ok := reliefRound("a PodDisruptionBudget refused the eviction; round 3: ..."); ok {
		t.Fatal("a refusal note parsed as a round")
	}
}
