package bench

import (
	"bufio"
	"os"
	"strings"
	"sync"
)

// bindTally counts, per pod, how often its node changed as the API server reported it: one
// change from "" to a node is one binding; anything more is a pod bound twice (or moved).
type bindTally struct {
	mu   sync.Mutex
	node map[string]string
	n    map[string]int
}

func newBindTally() *bindTally { return &bindTally{node: map[string]string{}, n: map[string]int{}} }

func (t *bindTally) observe(pod, node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if node == "" || t.node[pod] == node {
		return
	}
	t.node[pod] = node
	t.n[pod]++
}

// counts returns how many pods were bound exactly once and how many more than once.
func (t *bindTally) counts() (once, more int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.n {
		if n == 1 {
			once++
		} else {
			more++
		}
	}
	return once, more
}

// conflictLines are what the scheduler logs when the API server refuses a binding (the pod is
// already bound, or changed under it) or its cache saw a pod assumed twice.
var conflictLines = []string{"already assigned to node", "Binding rejected", "Operation cannot be fulfilled on pods", "pod was assumed on", "already in the scheduler cache"}

// bindingConflicts counts the log's lines reporting a refused or conflicting binding.
func bindingConflicts(logPath string) (int, error) { return countLines(logPath, conflictLines) }

// watcherOutageLines are what the load-aware plugins log when they cannot fetch the watcher's
// document (then they score neutrally, and the run would not measure load-aware scoring).
var watcherOutageLines = []string{"Load watcher unreachable", "Load watcher still unreachable"}

// countLines counts the lines of the file containing any of subs.
func countLines(logPath string, subs []string) (int, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		for _, c := range subs {
			if strings.Contains(sc.Text(), c) {
				n++
				break
			}
		}
	}
	return n, sc.Err()
}
