// Command kubectl-berth is the kubectl plugin `kubectl berth`:
//
//	kubectl berth explain pod NAME                 why berth-scheduler placed a pod where it did,
//	                                               from the running leader's decision record
//	                                               (the logic lives in pkg/explain)
//	kubectl berth podconfig release NS/NAME        the operator's end of a PodConfig's deletion,
//	                                               for when the operator is gone (podconfig.go)
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
	var code int
	if len(os.Args) > 1 && os.Args[1] == "podconfig" {
		code = podConfigMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	} else {
		code = explain.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		if code == 2 && (len(os.Args) < 2 || os.Args[1] != "explain") {
			os.Stderr.WriteString("       kubectl berth podconfig release NAMESPACE/NAME [flags]\n")
		}
	}
	stop()
	os.Exit(code)
}
