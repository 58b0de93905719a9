// Package krew checks the krew plugin manifest `make krew` generates (bin/krew/berth.yaml)
// with krew's own validator (bin/krew/validate-krew-manifest, built from tools/krew): the
// manifest passes; every archive it names exists beside it with the sha256 it states and holds
// the kubectl-berth binary; and the validator refuses each kind of broken manifest, so a pass
// means something. `make test` runs `make krew` before the e2e tier.
package krew

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/e2e/cluster"
)

type platform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bin    string `json:"bin"`
}

type manifest struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version   string     `json:"version"`
		Platforms []platform `json:"platforms"`
	} `json:"spec"`
}

func krewDir(t *testing.T) (dir, validator string, raw []byte) {
	t.Helper()
	bin, err := cluster.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(bin, "krew")
	validator = filepath.Join(dir, "validate-krew-manifest")
	raw, err = os.ReadFile(filepath.Join(dir, "berth.yaml"))
	if err != nil {
		t.Fatalf("%v: run `make krew` first (make test does)", err)
	}
	if _, err := os.Stat(validator); err != nil {
		t.Fatalf("%v: run `make krew` first (make test does)", err)
	}
	return dir, validator, raw
}

// validate runs krew's validator on content written as <dir>/<file>; the plugin name is the
// file's base name, as krew's index requires.
func validate(t *testing.T, validator, file string, content []byte) (string, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	// why: -skip-install: the install check downloads every archive from its published URL.
	out, err := exec.Command(validator, "-manifest", p, "-skip-install").CombinedOutput()
	return string(out), err
}

func TestGeneratedManifestIsValid(t *testing.T) {
	dir, validator, raw := krewDir(t)
	if out, err := validate(t, validator, "berth.yaml", raw); err != nil {
		t.Fatalf("krew refuses the generated manifest: %v\n%s", err, out)
	}
	var m manifest
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range m.Spec.Platforms {
		osArch := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		got = append(got, osArch)
		archive := filepath.Join(dir, path.Base(p.URI))
		b, err := os.ReadFile(archive)
		if err != nil {
			t.Errorf("%s: archive %s named by %s: %v", osArch, archive, p.URI, err)
			continue
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != p.SHA256 {
			t.Errorf("%s: sha256 of %s is %x, the manifest says %s", osArch, archive, sum, p.SHA256)
		}
		if !strings.Contains(path.Base(p.URI), m.Spec.Version) {
			t.Errorf("%s: archive %s does not carry version %s", osArch, p.URI, m.Spec.Version)
		}
		if err := holdsExecutable(b, p.Bin); err != nil {
			t.Errorf("%s: %v", osArch, err)
		}
	}
	slices.Sort(got)
	if want := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}; !slices.Equal(got, want) {
		t.Errorf("platforms %v, want %v", got, want)
	}
}

func holdsExecutable(archive []byte, name string) error {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return os.ErrNotExist
		}
		if err != nil {
			return err
		}
		if h.Name == name {
			if h.Mode&0o111 == 0 || h.Size < 1<<20 {
				return &os.PathError{Op: "check", Path: name, Err: os.ErrInvalid}
			}
			return nil
		}
	}
}

// TestValidatorRefusesBrokenManifests: each mutation of the generated manifest is refused, so
// the check above can fail.
func TestValidatorRefusesBrokenManifests(t *testing.T) {
	_, validator, raw := krewDir(t)
	spec := func(doc map[string]any) map[string]any { return doc["spec"].(map[string]any) }
	first := func(doc map[string]any) map[string]any { return spec(doc)["platforms"].([]any)[0].(map[string]any) }
	for _, tc := range []struct {
		name, file string
		mutate     func(doc map[string]any)
	}{
		{"file name is not the plugin name", "kubectl-berth.yaml", func(map[string]any) {}},
		{"version not semver", "berth.yaml", func(d map[string]any) { spec(d)["version"] = "0.1" }},
		{"sha256 not a sha256", "berth.yaml", func(d map[string]any) { first(d)["sha256"] = "abc" }},
		{"platform krew does not know", "berth.yaml", func(d map[string]any) {
			first(d)["selector"] = map[string]any{"matchLabels": map[string]any{"os": "plan9", "arch": "amd64"}}
		}},
		{"two platforms for one os/arch", "berth.yaml", func(d map[string]any) {
			ps := spec(d)["platforms"].([]any)
			spec(d)["platforms"] = append(ps, ps[0])
		}},
		{"no bin", "berth.yaml", func(d map[string]any) { delete(first(d), "bin") }},
		{"no short description", "berth.yaml", func(d map[string]any) { delete(spec(d), "shortDescription") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc map[string]any
			if err := yaml.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			tc.mutate(doc)
			b, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			if out, err := validate(t, validator, tc.file, b); err == nil {
				t.Fatalf("krew accepted a broken manifest:\n%s\n%s", b, out)
			}
		})
	}
}
