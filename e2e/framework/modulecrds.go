package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// ModuleCRDs downloads module@version through the Go module proxy, in a throwaway module of
// its own (so Berth's go.mod and go.work stay untouched), and reads the CRD manifests at
// files, relative to dir in the module: a project's own CRDs, not Berth's copy of them.
func ModuleCRDs(tmp, module, version, dir string, files ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte("module crds.test\n\ngo 1.26\n"), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir, cmd.Env = tmp, append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("downloading %s@%s through the module proxy: %v\n%s", module, version, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("%s@%s: %v %s", module, version, err, mod.Error)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(mod.Dir, dir, f))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
