// Command kubectl-berth is the kubectl plugin `kubectl berth`:
//
//	kubectl berth explain pod NAME                 why berth-scheduler placed a pod where it did,
//	                                               from the running leader's decision record
//	                                               (explain*.go here; the record format is pkg/decisionapi)
//	kubectl berth nodes [-l SEL] [-o wide|json]    Berth's view of every node: measured against
//	                                               requested, freshness, class, images
//	kubectl berth status                           components, leader, watcher freshness,
//	                                               webhook and CRDs (both in pkg/berthctl)
//	kubectl berth grants [-n NS] [-o json]         the PodNetworks and shared instance classes
//	                                               granted to a namespace (pkg/berthctl)
//	kubectl berth podconfig release NS/NAME        the operator's end of a PodConfig's deletion,
//	                                               for when the operator is gone (podconfig.go)
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/berth-sched/berth/pkg/berthctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	verb := ""
	if len(os.Args) > 1 {
		verb = os.Args[1]
	}
	switch verb {
	case "podconfig":
		code = podConfigMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "grants":
		code = berthctl.GrantsMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "nodes", "status":
		code = berthctl.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	default:
		code = explainMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
		if code == 2 && verb != "explain" {
			os.Stderr.WriteString("       kubectl berth nodes [-l SELECTOR] [--sort-by KEY] [-o table|wide|json|yaml] [flags]\n")
			os.Stderr.WriteString("       kubectl berth status [-o table|json|yaml] [flags]\n")
			os.Stderr.WriteString("       kubectl berth grants [-n NAMESPACE] [-o table|json|yaml] [flags]\n")
			os.Stderr.WriteString("       kubectl berth podconfig release NAMESPACE/NAME [flags]\n")
		}
	}
	stop()
	os.Exit(code)
}
