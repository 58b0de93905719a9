package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/berth-sched/berth/e2e/cluster"
)

// Small images stand in for Berth's: the pause program, a static Go binary that compiles for
// arm64 in seconds, under two names so that a push can fail half-way.
var (
	buildOnce sync.Once
	built     []Built
	buildErr  error
)

func testIndexes(t *testing.T) []Built {
	t.Helper()
	buildOnce.Do(func() {
		root, err := cluster.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		built, buildErr = BuildIndexes(context.Background(), BuildIndexOptions{Root: root, Targets: []Target{
			{Name: "one", Package: "./e2e/images/pause", LDFlags: "-s -w"},
			{Name: "two", Package: "./e2e/images/pause", LDFlags: "-s -w"},
		}})
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// The keychain must see only what each case writes: HOME (which go-homedir caches for the
// process) and podman's locations point at an empty directory for the whole package.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "berth-images-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("HOME", home)
	os.Setenv("XDG_RUNTIME_DIR", home)
	os.Unsetenv("REGISTRY_AUTH_FILE")
	os.Unsetenv("DOCKER_CONFIG")
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

func TestBuildIndexesEveryArchitecture(t *testing.T) {
	for _, b := range testIndexes(t) {
		im, err := b.Index.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if im.MediaType != types.OCIImageIndex {
			t.Errorf("%s: index media type %s, want %s", b.Target.Name, im.MediaType, types.OCIImageIndex)
		}
		machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
		var archs []string
		for _, d := range im.Manifests {
			if d.Platform == nil || d.Platform.OS != "linux" {
				t.Fatalf("%s: entry %s without a linux platform: %+v", b.Target.Name, d.Digest, d.Platform)
			}
			arch := d.Platform.Architecture
			archs = append(archs, arch)
			img, err := b.Index.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
				t.Errorf("%s/%s: manifest media type %s", b.Target.Name, arch, mt)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Architecture != arch || cf.OS != "linux" {
				t.Errorf("%s/%s: config says %s/%s", b.Target.Name, arch, cf.OS, cf.Architecture)
			}
			// The binary in the layer was compiled for the platform the index names.
			bin := fileInImage(t, img, b.Target.Name)
			f, err := elf.NewFile(bytes.NewReader(bin))
			if err != nil {
				t.Fatalf("%s/%s: not an ELF binary: %v", b.Target.Name, arch, err)
			}
			if f.Machine != machine[arch] {
				t.Errorf("%s/%s: binary for %s", b.Target.Name, arch, f.Machine)
			}
		}
		sort.Strings(archs)
		if strings.Join(archs, ",") != "amd64,arm64" {
			t.Errorf("%s: index platforms %v, want amd64 and arm64", b.Target.Name, archs)
		}
	}
}

func fileInImage(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("no %s in the layer", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == path {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// testRegistry is go-containerregistry's in-memory registry on loopback, optionally behind
// Basic auth and refusing manifests for repositories named in refuse.
func testRegistry(t *testing.T, user, pass string, refuse ...string) (host string, raw http.Handler) {
	t.Helper()
	raw = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="berth-test"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		for _, repo := range refuse {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/"+repo+"/manifests/") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprint(w, `{"errors":[{"code":"DENIED","message":"pushes to this repository are refused"}]}`)
				return
			}
		}
		raw.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(h) // 127.0.0.1
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), raw
}

// catalog lists the repositories holding a manifest, straight from the registry (no auth).
func catalog(t *testing.T, raw http.Handler) []string {
	t.Helper()
	rec := httptest.NewRecorder()
	raw.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v2/_catalog", nil))
	var c struct {
		Repositories []string `json:"repositories"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
		t.Fatalf("catalog %d %s: %v", rec.Code, rec.Body, err)
	}
	sort.Strings(c.Repositories)
	return c.Repositories
}

func dockerConfig(t *testing.T, host, user, pass string) {
	t.Helper()
	dir := t.TempDir()
	if user != "" {
		cfg := map[string]any{"auths": map[string]any{host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))}}}
		b, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DOCKER_CONFIG", dir)
}

func TestPushThenPullByDigest(t *testing.T) {
	b := testIndexes(t)
	cases := []struct {
		name               string
		regUser, regPass   string // the registry's; empty: open
		credUser, credPass string // the Docker config's; empty: none
		refuse             []string
		wantPushed         int
		wantErr            []string
		wantRepos          []string // repositories in the registry afterwards
	}{
		{name: "open registry", wantPushed: 2, wantRepos: []string{"berth/one", "berth/two"}},
		{name: "credentials from the Docker config", regUser: "ci", regPass: "s3cret", credUser: "ci", credPass: "s3cret",
			wantPushed: 2, wantRepos: []string{"berth/one", "berth/two"}},
		{name: "authentication required, no credentials", regUser: "ci", regPass: "s3cret",
			wantErr: []string{"nothing pushed", "authentication required", "docker login 127.0.0.1:"}, wantRepos: nil},
		{name: "wrong credentials", regUser: "ci", regPass: "s3cret", credUser: "ci", credPass: "guess",
			wantErr: []string{"nothing pushed", "no valid credentials"}, wantRepos: nil},
		{name: "a repository refuses half-way", refuse: []string{"two"}, wantPushed: 1,
			wantErr: []string{"pushed 1 of 2", "berth/one:t1@sha256:", "NOT pushed:", "berth/two:t1", "may not push"}, wantRepos: []string{"berth/one"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host, raw := testRegistry(t, tc.regUser, tc.regPass, tc.refuse...)
			dockerConfig(t, host, tc.credUser, tc.credPass)
			pushed, err := Push(context.Background(), PushOptions{Registry: host + "/berth", Tag: "t1"}, b)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Logf("push refused as the user sees it: %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
			if len(pushed) != tc.wantPushed {
				t.Errorf("%d reported pushed, want %d: %v", len(pushed), tc.wantPushed, pushed)
			}
			if got := catalog(t, raw); strings.Join(got, ",") != strings.Join(tc.wantRepos, ",") {
				t.Errorf("registry holds %v, want %v", got, tc.wantRepos)
			}
			// Every image reported pushed pulls back, by digest, identical to what was built.
			for i, p := range pushed {
				pullAndCompare(t, p, b[i].Index)
			}
		})
	}
}

func pullAndCompare(t *testing.T, p Pushed, local v1.ImageIndex) {
	t.Helper()
	opts := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	byDigest := p.Ref.Context().Digest(p.Digest.String())
	idx, err := remote.Index(byDigest, opts...)
	if err != nil {
		t.Fatalf("pull %s: %v", byDigest, err)
	}
	want, _ := local.Digest()
	if got, _ := idx.Digest(); got != want || p.Digest != want {
		t.Fatalf("%s: pulled index %s, reported %s, built %s", p.Ref, got, p.Digest, want)
	}
	// The tag points at the same index.
	desc, err := remote.Head(p.Ref, opts...)
	if err != nil || desc.Digest != want {
		t.Errorf("tag %s -> %v (%v), want %s", p.Ref, desc, err, want)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs []string
	for _, d := range im.Manifests {
		archs = append(archs, d.Platform.Architecture)
		img, err := remote.Image(p.Ref.Context().Digest(d.Digest.String()), opts...)
		if err != nil {
			t.Fatalf("pull %s/%s: %v", p.Ref, d.Platform.Architecture, err)
		}
		localImg, err := local.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		compareImages(t, img, localImg)
	}
	sort.Strings(archs)
	if strings.Join(archs, ",") != "amd64,arm64" {
		t.Errorf("%s: pulled index has %v, want amd64 and arm64", p.Ref, archs)
	}
}

func compareImages(t *testing.T, got, want v1.Image) {
	t.Helper()
	gm, err := got.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	wm, _ := want.RawManifest()
	if !bytes.Equal(gm, wm) {
		t.Errorf("manifest differs:\n%s\n%s", gm, wm)
	}
	gc, _ := got.RawConfigFile()
	wc, _ := want.RawConfigFile()
	if !bytes.Equal(gc, wc) {
		t.Errorf("config differs")
	}
	gl, _ := got.Layers()
	wl, _ := want.Layers()
	for i := range wl {
		rc, err := gl[i].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		gb, _ := io.ReadAll(rc)
		rc.Close()
		rc, _ = wl[i].Compressed()
		wb, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(gb, wb) {
			t.Errorf("layer %d: %d bytes pulled, %d built, contents differ", i, len(gb), len(wb))
		}
	}
}

func TestRefsRefuseBadInput(t *testing.T) {
	ts := []Target{{Name: "berth-scheduler"}}
	cases := []struct {
		registry, tag, want string
	}{
		{"", "dev", "set REGISTRY=host[:port]/path"},
		{"https://ghcr.io/me", "dev", "without a scheme"},
		{"ghcr.io/Me Upper", "dev", "do not make an image reference"},
		{"ghcr.io/me", "bad tag!", "do not make an image reference"},
	}
	for _, tc := range cases {
		if _, err := Refs(tc.registry, tc.tag, ts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Refs(%q, %q): %v, want %q", tc.registry, tc.tag, err, tc.want)
		}
	}
	refs, err := Refs("127.0.0.1:5000/team/berth/", "v1", ts)
	if err != nil || len(refs) != 1 || refs[0].String() != "127.0.0.1:5000/team/berth/berth-scheduler:v1" {
		t.Errorf("Refs: %v %v", refs, err)
	}
}

// The harness names the images it runs without importing this package: the tags must agree.
func TestHarnessImageTagsMatchTargets(t *testing.T) {
	if PauseRef != cluster.PauseImage {
		t.Errorf("pause image %q here, %q in the harness (containerd's sandbox_image)", PauseRef, cluster.PauseImage)
	}
	if CoreDNSRef != cluster.CoreDNSImage {
		t.Errorf("CoreDNS image %q here, %q in the harness", CoreDNSRef, cluster.CoreDNSImage)
	}
}
