package images

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestLayerTar(t *testing.T) {
	b, err := LayerTar(Target{Name: "berth-x"}, []byte("binary"))
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]int64{}
	tr := tar.NewReader(bytes.NewReader(b))
	var body []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[h.Name] = h.Mode
		if h.Name == "berth-x" {
			body, _ = io.ReadAll(tr)
		}
	}
	cases := map[string]int64{"tmp/": 0o1777, "etc/": 0o755, "berth-x": 0o755, "etc/passwd": 0o644, "proc/": 0o555}
	for n, want := range cases {
		if got, ok := modes[n]; !ok || got != want {
			t.Errorf("%s: mode %o (present %v), want %o", n, got, ok, want)
		}
	}
	if string(body) != "binary" {
		t.Errorf("binary content %q", body)
	}
	if _, err := LayerTar(Target{Name: "a/b"}, nil); err == nil {
		t.Error("a name with a slash was accepted")
	}
}

func TestImageRoundTrip(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("\x7fELF fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		t        Target
		ref      string
		wantUser string
	}{
		{Target{Name: "berth-scheduler"}, "localhost/berth/berth-scheduler:dev", "65532:65532"},
		{Target{Name: "berth-agent", Root: true}, "localhost/berth/berth-agent:dev", "0:0"},
		{Target{Name: "pause", Ref: PauseRef}, PauseRef, "65532:65532"},
	}
	for _, tc := range cases {
		if tc.t.ImageRef() != tc.ref {
			t.Errorf("%s: ref %s, want %s", tc.t.Name, tc.t.ImageRef(), tc.ref)
		}
		img, err := Image(tc.t, bin)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, tc.t.Name+".tar")
		if err := Write(out, tc.t.ImageRef(), img); err != nil {
			t.Fatal(err)
		}
		tag, _ := name.NewTag(tc.ref)
		back, err := tarball.ImageFromPath(out, &tag)
		if err != nil {
			t.Fatalf("%s: reading back: %v", tc.t.Name, err)
		}
		cf, err := back.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != tc.wantUser || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/"+tc.t.Name || cf.OS != "linux" {
			t.Errorf("%s: config user %q entrypoint %v os %s", tc.t.Name, cf.Config.User, cf.Config.Entrypoint, cf.OS)
		}
		layers, _ := back.Layers()
		if len(layers) != 1 {
			t.Errorf("%s: %d layers, want 1", tc.t.Name, len(layers))
		}
		d1, _ := img.Digest()
		again, _ := Image(tc.t, bin)
		if d2, _ := again.Digest(); d1 != d2 {
			t.Errorf("%s: same binary, different digests %s %s", tc.t.Name, d1, d2)
		}
	}
}

func TestTargets(t *testing.T) {
	root := t.TempDir()
	names := func() []string {
		var n []string
		for _, x := range Targets(root) {
			n = append(n, x.Name)
		}
		return n
	}
	if got := names(); len(got) != 6 || got[3] != "pause" || got[4] != "netecho" || got[5] != "coredns" {
		t.Errorf("targets without an operator: %v", got)
	}
	if err := os.MkdirAll(filepath.Join(root, "cmd", "operator"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cmd", "operator", "main.go"), []byte("package main"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 7 || got[3] != "berth-operator" {
		t.Errorf("targets with an operator: %v", got)
	}
}
