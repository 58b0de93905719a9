package framework

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

// PatchedPod is a copy of pod with the isolation webhook's JSON patch applied, as the API
// server would apply it.
func PatchedPod(t testing.TB, pod *corev1.Pod, patch []webhook.PatchOp) *corev1.Pod {
	t.Helper()
	raw, _ := json.Marshal(pod)
	ops, _ := json.Marshal(patch)
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("patch %s: %v", ops, err)
	}
	got := &corev1.Pod{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	return got
}
