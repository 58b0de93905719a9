package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PushArchitectures are the linux architectures `make push` builds each image for.
var PushArchitectures = []string{"amd64", "arm64"}

// PushTargets are the images a registry gets: Berth's binaries (not the pause image, which
// only the local node needs; a real cluster brings its own).
func PushTargets(root string) []Target {
	var out []Target
	for _, t := range Targets(root) {
		if t.Ref == "" {
			out = append(out, t)
		}
	}
	return out
}

// BuildIndexOptions choose what BuildIndexes builds.
type BuildIndexOptions struct {
	// Root is the repository root (holding go.work).
	Root string
	// Targets to build; default PushTargets(Root).
	Targets []Target
	// Architectures; default PushArchitectures.
	Architectures []string
	// Go is the go command; default "go".
	Go   string
	Logf func(format string, args ...any)
}

// Built is one image as a multi-platform OCI index.
type Built struct {
	Target Target
	Index  v1.ImageIndex
}

// BuildIndexes compiles every target for every architecture (CGO_ENABLED=0 GOOS=linux
// GOARCH=<arch>) and packages each target's images as one OCI image index.
func BuildIndexes(ctx context.Context, o BuildIndexOptions) ([]Built, error) {
	if o.Root == "" {
		return nil, errors.New("images: BuildIndexOptions.Root (the repository root) is required")
	}
	if o.Targets == nil {
		o.Targets = PushTargets(o.Root)
	}
	if o.Architectures == nil {
		o.Architectures = PushArchitectures
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	work, err := os.MkdirTemp("", "berth-push-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	var out []Built
	for _, t := range o.Targets {
		var adds []mutate.IndexAddendum
		for _, arch := range o.Architectures {
			bin := filepath.Join(work, t.Name+"-"+arch)
			o.Logf("building %s for linux/%s", t.Name, arch)
			cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-ldflags", t.LDFlags, "-o", bin, t.Package)
			cmd.Dir = o.Root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
			if b, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("images: GOARCH=%s go build %s: %w\n%s", arch, t.Package, err, b)
			}
			img, err := ociImage(t, bin, arch)
			if err != nil {
				return nil, err
			}
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
		}
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
		// Materialise now: the binaries' directory goes away when this returns.
		if _, err := idx.Digest(); err != nil {
			return nil, err
		}
		out = append(out, Built{Target: t, Index: idx})
	}
	return out, nil
}

// ociImage is ImageFor with OCI media types throughout (manifest, config and layer), as an
// OCI index's entries should be. Its layer is read into memory, so the binary may go.
func ociImage(t Target, binPath, arch string) (v1.Image, error) {
	docker, err := ImageFor(t, binPath, arch)
	if err != nil {
		return nil, err
	}
	cf, err := docker.ConfigFile()
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return nil, err
	}
	lt, err := LayerTar(t, bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(lt)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	// The same layer bytes, so the same diff ID: the Docker image's config applies as is.
	return mutate.ConfigFile(img, cf)
}

// PushOptions say where and how to push.
type PushOptions struct {
	// Registry is host[:port]/path; each image goes to <Registry>/<name>:<Tag>.
	Registry string
	Tag      string
	// Keychain resolves credentials; default authn.DefaultKeychain (the Docker config,
	// $DOCKER_CONFIG, podman's auth.json).
	Keychain authn.Keychain
	// Transport; default remote's.
	Transport http.RoundTripper
	Logf      func(format string, args ...any)
}

// Pushed is one image in the registry.
type Pushed struct {
	Target Target
	// Ref is <Registry>/<name>:<Tag>; Digest the index's, so Ref@Digest pins it.
	Ref    name.Tag
	Digest v1.Hash
}

// Refs checks the registry and tag and names every image's destination.
func Refs(registry, tag string, targets []Target) ([]name.Tag, error) {
	registry = strings.TrimSuffix(strings.TrimSpace(registry), "/")
	if registry == "" {
		return nil, errors.New("no registry: set REGISTRY=host[:port]/path (e.g. ghcr.io/you/berth or 127.0.0.1:5000/berth)")
	}
	if strings.Contains(registry, "://") {
		return nil, fmt.Errorf("registry %q: give host[:port]/path without a scheme", registry)
	}
	var out []name.Tag
	for _, t := range targets {
		ref, err := name.NewTag(registry+"/"+t.Name+":"+tag, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("registry %q and tag %q do not make an image reference: %w", registry, tag, err)
		}
		out = append(out, ref)
	}
	return out, nil
}

// Push pushes every built index. It first checks, for every destination, that the registry
// accepts a push with the credentials found, so a refusal stops it before anything is written;
// a failure after that says exactly which images are in the registry and which are not.
func Push(ctx context.Context, o PushOptions, built []Built) ([]Pushed, error) {
	if o.Keychain == nil {
		o.Keychain = authn.DefaultKeychain
	}
	if o.Transport == nil {
		o.Transport = remote.DefaultTransport
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Tag == "" {
		o.Tag = "dev"
	}
	targets := make([]Target, len(built))
	for i, b := range built {
		targets[i] = b.Target
	}
	refs, err := Refs(o.Registry, o.Tag, targets)
	if err != nil {
		return nil, err
	}
	for _, ref := range refs {
		if err := remote.CheckPushPermission(ref, o.Keychain, o.Transport); err != nil {
			return nil, fmt.Errorf("nothing pushed: %w", explain(ref, err))
		}
	}
	var pushed []Pushed
	for i, b := range built {
		ref := refs[i]
		o.Logf("pushing %s", ref)
		err := remote.WriteIndex(ref, b.Index, remote.WithContext(ctx), remote.WithAuthFromKeychain(o.Keychain),
			remote.WithTransport(o.Transport))
		if err != nil {
			var done []string
			for _, p := range pushed {
				done = append(done, p.Ref.String()+"@"+p.Digest.String())
			}
			var notDone []string
			for _, r := range refs[i:] {
				notDone = append(notDone, r.String())
			}
			status := "nothing pushed"
			if len(done) > 0 {
				status = fmt.Sprintf("pushed %d of %d (%s)", len(done), len(refs), strings.Join(done, ", "))
			}
			return pushed, fmt.Errorf("%s; NOT pushed: %s: %w", status, strings.Join(notDone, ", "), explain(ref, err))
		}
		d, err := b.Index.Digest()
		if err != nil {
			return pushed, err
		}
		pushed = append(pushed, Pushed{Target: b.Target, Ref: ref, Digest: d})
	}
	return pushed, nil
}

// explain turns a registry's refusal into what to do about it.
func explain(ref name.Tag, err error) error {
	host := ref.Context().RegistryStr()
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized:
			return fmt.Errorf("registry %s refused %s: authentication required, and the Docker config has no valid credentials for %s (log in with `docker login %s`, or point DOCKER_CONFIG at a config.json that has them): %w",
				host, ref.Context(), host, host, err)
		case http.StatusForbidden:
			return fmt.Errorf("registry %s refused %s: the credentials found for %s may not push there: %w", host, ref.Context(), host, err)
		}
	}
	return fmt.Errorf("pushing %s: %w", ref, err)
}
