// Command kubectl-berth is the kubectl plugin `kubectl berth`: `kubectl berth explain pod NAME`
// prints why berth-scheduler placed a pod where it did, from the running leader's decision
// record. The logic lives in pkg/explain.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/berth-sched/berth/pkg/explain"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := explain.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
