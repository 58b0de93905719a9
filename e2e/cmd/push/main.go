// Command push builds Berth's images for linux/amd64 and linux/arm64 and pushes each as one
// OCI image index to a registry (`make push REGISTRY=host[:port]/path [TAG=dev]`). Credentials
// come from the Docker config (`docker login`, $DOCKER_CONFIG) or podman's auth.json.
//
//	push -registry ghcr.io/you/berth [-tag v0.1.0] [-only berth-scheduler,berth-agent] [-arch amd64,arm64] [-v]
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
	registry := flag.String("registry", "", "destination host[:port]/path; each image goes to <registry>/<name>:<tag>")
	tag := flag.String("tag", "dev", "tag of every image")
	only := flag.String("only", "", "comma-separated images to push (default all)")
	arch := flag.String("arch", strings.Join(images.PushArchitectures, ","), "comma-separated GOARCH values, one index entry each")
	verbose := flag.Bool("v", false, "print progress")
	flag.Parse()
	root, err := cluster.RepoRoot()
	if err != nil {
		fail(err)
	}
	targets := images.PushTargets(root)
	// Refuse a bad registry or tag before minutes of cross-compiling.
	if _, err := images.Refs(*registry, *tag, targets); err != nil {
		fail(err)
	}
	if *only != "" {
		want := map[string]bool{}
		for _, n := range strings.Split(*only, ",") {
			want[n] = true
		}
		var sel []images.Target
		for _, t := range targets {
			if want[t.Name] {
				sel = append(sel, t)
				delete(want, t.Name)
			}
		}
		if len(want) > 0 {
			fail(fmt.Errorf("unknown image(s) in -only: %v", want))
		}
		targets = sel
	}
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "push: "+format+"\n", args...) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	built, err := images.BuildIndexes(ctx, images.BuildIndexOptions{Root: root, Targets: targets,
		Architectures: strings.Split(*arch, ","), Logf: logf})
	if err != nil {
		fail(err)
	}
	pushed, err := images.Push(ctx, images.PushOptions{Registry: *registry, Tag: *tag, Logf: logf}, built)
	for _, p := range pushed {
		fmt.Printf("%s@%s\n", p.Ref, p.Digest)
	}
	if err != nil {
		fail(err)
	}
	fmt.Printf("pushed %d images (%s); install with:\n  helm install berth charts/berth --namespace berth-system --create-namespace --set global.image.registry=%s --set global.image.tag=%s\n",
		len(pushed), *arch, strings.TrimSuffix(*registry, "/"), *tag)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "push:", err)
	os.Exit(1)
}
