// Command berth-scheduler is the upstream kube-scheduler with Berth's plugins.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/berth-sched/berth/pkg/scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
