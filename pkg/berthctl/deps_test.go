package berthctl

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoKubernetes: kubectl-berth is a client; it depends on contracts (api/, loadapi,
// decisionapi), and links no package of k8s.io/kubernetes (a plugin's package would bring 14).
func TestLinksNoKubernetes(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/kubernetes/") || strings.Contains(dep, "berth/pkg/scheduler/plugins/") {
			t.Errorf("berthctl links %s", dep)
		}
	}
}
