// Command images builds Berth's binaries statically and writes one OCI image tarball per
// binary (plus the pause image) to bin/images/, with no Docker and no registry (`make images`).
//
//	images [-out DIR] [-only berth-scheduler,pause] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/berth-sched/berth/e2e/images"

	"github.com/berth-sched/berth/e2e/cluster"
)

func main() {
	out := flag.String("out", "", "output directory (default bin/images at the repository root)")
	only := flag.String("only", "", "comma-separated targets to build (default all)")
	verbose := flag.Bool("v", false, "print progress")
	flag.Parse()
	root, err := cluster.RepoRoot()
	if err != nil {
		fail(err)
	}
	o := images.Options{Root: root, OutDir: *out}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	if *verbose {
		o.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "images: "+format+"\n", args...) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := images.BuildAll(ctx, o)
	if err != nil {
		fail(err)
	}
	for _, r := range res {
		fmt.Printf("%s\t%s\t%s\n", r.Path, r.Target.ImageRef(), r.Digest)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "images:", err)
	os.Exit(1)
}
