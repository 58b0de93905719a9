// Package images builds Berth's container images without Docker or a registry: each binary is
// compiled statically and packaged with go-containerregistry as a single-layer OCI image in a
// `docker save`-style tarball, which `ctr images import` (the real node of e2e/cluster) and
// `docker load` both read.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PauseRef is the pause image's tag; containerd's sandbox_image on the real node names it.
const PauseRef = "registry.k8s.io/pause:3.10.1"

// NetechoRef is the tag of the PodConfig test workload (e2e/images/netecho).
const NetechoRef = "localhost/berth/netecho:dev"

// Nonroot is the distroless "nonroot" uid/gid the images run as unless the binary needs root.
const Nonroot = 65532

// K8sLDFlags stamps the k8s version into binaries that embed the scheduler framework (the same
// flags as the Makefile's K8S_LDFLAGS).
const K8sLDFlags = "-s -w" +
	" -X k8s.io/component-base/version.gitVersion=v1.37.1" +
	" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" +
	" -X k8s.io/component-base/version.gitTreeState=clean" +
	" -X k8s.io/client-go/pkg/version.gitVersion=v1.37.1" +
	" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"

// Target is one image: where its binary's main package is and how the image runs it.
type Target struct {
	// Name of the binary and of the image (localhost/berth/<Name>:dev).
	Name string
	// Package is the main package, relative to the repository root (./cmd/scheduler).
	Package string
	// LDFlags for go build.
	LDFlags string
	// Root runs the image as uid 0 (berth-agent reads host cgroups and /proc); otherwise 65532.
	Root bool
	// Ref overrides the tag.
	Ref string
	// Module, if set, is the directory (relative to the repository root) of a module outside
	// go.work that Package is built in (a tool whose dependencies clash with Berth's).
	Module string
}

// ImageRef is the tag of a target's image.
func (t Target) ImageRef() string {
	if t.Ref != "" {
		return t.Ref
	}
	return "localhost/berth/" + t.Name + ":dev"
}

// Targets lists the images of the repository at root: Berth's binaries (berth-operator only
// where cmd/operator has a main package) and the pause image.
func Targets(root string) []Target {
	ts := []Target{
		{Name: "berth-scheduler", Package: "./cmd/scheduler", LDFlags: K8sLDFlags},
		// The agent reads the node's cgroup files and /proc of other users' processes.
		{Name: "berth-agent", Package: "./cmd/agent", LDFlags: "-s -w", Root: true},
		{Name: "berth-loadwatcher", Package: "./cmd/loadwatcher", LDFlags: "-s -w"},
	}
	if mains, _ := filepath.Glob(filepath.Join(root, "cmd", "operator", "*.go")); len(mains) > 0 {
		ts = append(ts, Target{Name: "berth-operator", Package: "./cmd/operator", LDFlags: "-s -w"})
	}
	return append(ts, Target{Name: "pause", Package: "./e2e/images/pause", LDFlags: "-s -w", Ref: PauseRef},
		// The PodConfig test and demo workload (unprivileged, uid 65532); a Ref of its own
		// keeps it out of PushTargets.
		Target{Name: "netecho", Package: "./e2e/images/netecho", LDFlags: "-s -w", Ref: NetechoRef},
		// The local cluster's DNS (tools/coredns, pinned there).
		Target{Name: "coredns", Package: ".", Module: "tools/coredns", LDFlags: "-s -w", Ref: CoreDNSRef})
}

// CoreDNSRef is the cluster DNS image's tag (e2e/cluster deploys it).
const CoreDNSRef = "localhost/berth/coredns:v1.15.0"

// Options of BuildAll.
type Options struct {
	// Root is the repository root (holding go.work).
	Root string
	// OutDir receives <name>.tar; default Root/bin/images.
	OutDir string
	// Only limits the build to these target names; empty builds all.
	Only []string
	// Go is the go command; default "go".
	Go string
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// Result is one written image.
type Result struct {
	Target Target
	Path   string
	Digest v1.Hash
}

// BuildAll compiles every target statically and writes its image tarball.
func BuildAll(ctx context.Context, o Options) ([]Result, error) {
	if o.Root == "" {
		return nil, errors.New("images: Options.Root (the repository root) is required")
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join(o.Root, "bin", "images")
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	targets := Targets(o.Root)
	if len(o.Only) > 0 {
		want := map[string]bool{}
		for _, n := range o.Only {
			want[n] = true
		}
		var sel []Target
		for _, t := range targets {
			if want[t.Name] {
				sel = append(sel, t)
				delete(want, t.Name)
			}
		}
		if len(want) > 0 {
			var unknown []string
			for n := range want {
				unknown = append(unknown, n)
			}
			sort.Strings(unknown)
			return nil, fmt.Errorf("images: unknown target(s) %s; known: %s", strings.Join(unknown, ", "), names(targets))
		}
		targets = sel
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "berth-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	var out []Result
	for _, t := range targets {
		bin := filepath.Join(work, t.Name)
		o.Logf("building %s (%s)", t.Name, t.Package)
		cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-ldflags", t.LDFlags, "-o", bin, t.Package)
		cmd.Dir = o.Root
		// Static: the images have no libc. This machine's architecture: the tarballs are for
		// the local node (make push builds every platform, see push.go).
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if t.Module != "" {
			cmd.Dir = filepath.Join(o.Root, t.Module)
			cmd.Env = append(cmd.Env, "GOWORK=off")
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			return out, fmt.Errorf("images: go build %s: %w\n%s", t.Package, err, b)
		}
		img, err := Image(t, bin)
		if err != nil {
			return out, err
		}
		path := filepath.Join(o.OutDir, t.Name+".tar")
		if err := Write(path, t.ImageRef(), img); err != nil {
			return out, err
		}
		d, err := img.Digest()
		if err != nil {
			return out, err
		}
		o.Logf("wrote %s (%s, %s)", path, t.ImageRef(), d)
		out = append(out, Result{Target: t, Path: path, Digest: d})
	}
	return out, nil
}

func names(ts []Target) string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Name)
	}
	return strings.Join(n, ", ")
}

// epoch fixes every timestamp so the same binary always gives the same image digest.
var epoch = time.Unix(0, 0).UTC()

// Image packages the static binary at binPath as a one-layer image running /<name>, for this
// machine's architecture.
func Image(t Target, binPath string) (v1.Image, error) { return ImageFor(t, binPath, runtime.GOARCH) }

// ImageFor is Image for a binary built for GOARCH arch.
func ImageFor(t Target, binPath, arch string) (v1.Image, error) {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", t.Name, err)
	}
	layerTar, err := LayerTar(t, bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{"/" + t.Name}
	cf.Config.Env = []string{"PATH=/", "SSL_CERT_DIR=/etc/ssl/certs"}
	cf.Config.WorkingDir = "/"
	cf.Config.User = fmt.Sprintf("%d:%d", Nonroot, Nonroot)
	if t.Root {
		cf.Config.User = "0:0"
	}
	cf.Config.Labels = map[string]string{"org.opencontainers.image.title": t.Name, "org.opencontainers.image.source": "berth"}
	return mutate.ConfigFile(img, cf)
}

// LayerTar is the image's only layer: the directories a static binary expects (tmp/ world
// writable with the sticky bit), passwd/group naming root and nonroot, and the binary.
func LayerTar(t Target, bin []byte) ([]byte, error) {
	if t.Name == "" || strings.ContainsAny(t.Name, "/ ") {
		return nil, fmt.Errorf("images: bad binary name %q", t.Name)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, owner int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: epoch, Uid: owner, Gid: owner})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []struct {
		name  string
		mode  int64
		owner int
	}{{"dev", 0o755, 0}, {"etc", 0o755, 0}, {"etc/ssl", 0o755, 0}, {"etc/ssl/certs", 0o755, 0}, {"proc", 0o555, 0},
		{"sys", 0o555, 0}, {"tmp", 0o1777, 0}, {"var", 0o755, 0}, {"var/run", 0o755, 0}, {"home", 0o755, 0},
		{"home/nonroot", 0o700, Nonroot}} {
		if err := dir(d.name, d.mode, d.owner); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", Nonroot, Nonroot))},
		{"etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", Nonroot))},
		{"etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")},
		{t.Name, 0o755, bin},
	}
	for _, f := range files {
		if err := file(f.name, f.mode, f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write saves img as a tarball tagged ref (readable by `ctr images import` and `docker load`).
func Write(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("images: tag %q: %w", ref, err)
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("images: writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
