package sysched

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-sched/berth/pkg/scheduler/signtest"
)

// TestSignPod: pods whose profiles resolve to the same syscalls share a signature however
// they reference them; a different set never does; a pod naming a missing profile is not
// signed, so PreScore runs for it and warns on the pod.
func TestSignPod(t *testing.T) {
	args, err := ParseArgs(&Args{DefaultProfileNamespace: "default", DefaultProfileName: "full-seccomp"})
	if err != nil {
		t.Fatal(err)
	}
	z, x, full := upstreamProfiles("default")
	e := newEnv(t, shapeNamespaced, args, z, x, full)
	zPath, xPath := e.path("default", "z-seccomp"), e.path("default", "x-seccomp")

	sig := func(p *v1.Pod) string { t.Helper(); return signtest.Signature(t, e.pl, SignerName, p) }
	zAnnotated := e.newPod("za", func(p *v1.Pod) {
		p.Annotations = map[string]string{annotationPodSeccomp: "localhost/" + zPath}
	})
	for _, tc := range []struct {
		name string
		a, b *v1.Pod
		same bool
	}{
		{"same profile, other pod", e.newPod("z1", withPodProfile(zPath)), e.newPod("z2", withPodProfile(zPath)), true},
		{"same profile by annotation", e.newPod("z1", withPodProfile(zPath)), zAnnotated, true},
		{"profiles one syscall apart", e.newPod("z1", withPodProfile(zPath)), e.newPod("x1", withPodProfile(xPath)), false},
		{"no profile is the full one", e.newPod("d1", nil), e.newPod("d2", nil), true},
		{"full vs a narrow profile", e.newPod("d1", nil), e.newPod("x2", withPodProfile(xPath)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sig(tc.a) == sig(tc.b); got != tc.same {
				t.Fatalf("same signature = %v, want %v", got, tc.same)
			}
		})
	}

	missing := e.newPod("m", withPodProfile(e.path("default", "nope")))
	if f, st := e.pl.SignPod(context.Background(), missing); st.Code() != fwk.Unschedulable || f != nil {
		t.Fatalf("SignPod(missing profile) = %v %v, want no fragments and Unschedulable", f, st)
	}
}
