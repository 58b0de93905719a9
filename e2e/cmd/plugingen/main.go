// Command plugingen regenerates the SecondaryScheduler's spec.plugins, the plugin table's rows
// and the registry's factories from the +berth:plugin markers in api/config/v1
// (hack/generate.sh runs it before controller-gen; see package plugingen).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/berth-sched/berth/e2e/plugingen"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := plugingen.Write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "plugingen:", err)
		os.Exit(1)
	}
}
