package decisionrecord

import (
	"fmt"
	"sync"
	"testing"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

// Refusals recorded from many goroutines at once, as the framework's filter goroutines do,
// come out as if recorded one by one: the latest verdict per node, each node's reasons counted
// once, a node that passed later forgotten.
func TestRefusalsFromManyGoroutines(t *testing.T) {
	var r refusals
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				node := fmt.Sprintf("node-%04d", i)
				// Every goroutine refuses every node: reasons must still count each node once.
				r.add(node, &decisionapi.Verdict{Plugin: "P", Code: "Unschedulable", Reasons: []string{fmt.Sprintf("class %d", i%3)}})
			}
		}()
	}
	wg.Wait()
	for i := 0; i < 500; i += 5 {
		r.passed(fmt.Sprintf("node-%04d", i))
	}
	if n := r.count(); n != 400 {
		t.Fatalf("%d refused, want 400", n)
	}
	names, verdicts := r.first(3)
	if fmt.Sprint(names) != "[node-0001 node-0002 node-0003]" || verdicts["node-0002"].Reasons[0] != "class 2" {
		t.Fatalf("first three %v (%v)", names, verdicts["node-0002"])
	}
	counts := r.reasonCounts()
	total := 0
	for _, c := range counts {
		total += c.Nodes
	}
	// Counted at first refusal: the 100 nodes that passed later still counted.
	if len(counts) != 3 || total != 500 {
		t.Fatalf("reason counts %+v, want 3 reasons over 500 nodes", counts)
	}
	r.keepFirst(2)
	if n := r.count(); n != 2 {
		t.Fatalf("%d kept, want 2", n)
	}
}

// More distinct reasons than maxReasons (reasons naming the node): the most counted stay, the
// rest fold into one "other reasons" entry, and no node is lost from the totals.
func TestRefusalReasonsAreBounded(t *testing.T) {
	var r refusals
	for i := 0; i < 1000; i++ {
		reason := fmt.Sprintf("node %d is special", i)
		if i%2 == 0 {
			reason = "common"
		}
		r.add(fmt.Sprintf("n%d", i), &decisionapi.Verdict{Plugin: "P", Code: "Unschedulable", Reasons: []string{reason}})
	}
	counts := r.reasonCounts()
	total := 0
	var other, common int
	for _, c := range counts {
		total += c.Nodes
		switch {
		case c.Plugin == otherReasons.plugin && c.Reason == otherReasons.reason:
			other = c.Nodes
		case c.Reason == "common":
			common = c.Nodes
		}
	}
	if len(counts) != maxReasons || total != 1000 || common != 500 || other == 0 || counts[0].Reason != "common" {
		t.Fatalf("%d entries (want %d), total %d (want 1000), common %d (want 500, first), other %d", len(counts), maxReasons, total, common, other)
	}
}
