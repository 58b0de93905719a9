// Command loadwatcher serves node load in the paypal/load-watcher API: see
// pkg/loadwatcher/README.md for the flags.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/berth-sched/berth/pkg/loadwatcher/app"
)

func main() {
	fs := flag.NewFlagSet("loadwatcher", flag.ExitOnError)
	klog.InitFlags(fs)
	var o app.Options
	o.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	defer klog.Flush()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, o); err != nil {
		klog.ErrorS(err, "Load watcher failed")
		klog.Flush()
		os.Exit(1)
	}
}
