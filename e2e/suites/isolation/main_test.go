package isolation

import (
	"fmt"
	"os"
	"testing"

	"github.com/berth-sched/berth/e2e/framework"
)

// TestMain fails the suite when anything it or the processes it started put in the temporary
// directory outlives teardown.
func TestMain(m *testing.M) {
	check := framework.IsolateTemp()
	code := m.Run()
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}
