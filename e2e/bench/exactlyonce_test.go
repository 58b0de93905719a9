package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBindTally(t *testing.T) {
	cases := []struct {
		name       string
		events     [][2]string // pod, node as watched
		once, more int
	}{
		{"created then bound", [][2]string{{"a", ""}, {"a", "n1"}, {"a", "n1"}}, 1, 0},
		{"never bound", [][2]string{{"a", ""}}, 0, 0},
		{"moved to another node", [][2]string{{"a", "n1"}, {"a", "n2"}}, 0, 1},
		{"two pods", [][2]string{{"a", "n1"}, {"b", "n2"}, {"b", "n2"}}, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tally := newBindTally()
			for _, e := range tc.events {
				tally.observe(e[0], e[1])
			}
			if once, more := tally.counts(); once != tc.once || more != tc.more {
				t.Errorf("once %d more %d, want %d %d", once, more, tc.once, tc.more)
			}
		})
	}
}

func TestBindingConflicts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sched.log")
	log := `I1123 schedule_one.go] "Successfully bound pod to node" pod="bench/pod-00001"
E1123 schedule_one.go] "Error scheduling pod; retrying" err="Operation cannot be fulfilled on pods/binding \"pod-1\": pod pod-1 is already assigned to node \"n1\""
E1123 leaderelection.go] "Operation cannot be fulfilled on leases.coordination.k8s.io"
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := bindingConflicts(path)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d conflict lines, want 1 (the lease conflict is not a binding)", n)
	}
	if _, err := bindingConflicts(filepath.Join(t.TempDir(), "missing.log")); err == nil {
		t.Error("no error for a missing log")
	}
}
