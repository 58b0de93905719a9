package chart

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The agent gets exactly what its enabled features need (issue 13: least privilege): nothing
// for load sampling, uid 0 without capabilities for the CRI socket, and the network
// capabilities and the node's network namespace only with PodConfig.
func TestAgentPrivilegesPerFeature(t *testing.T) {
	for _, tc := range []struct {
		values                 string
		wantUID                int64
		wantAdd                []corev1.Capability
		wantHostNet, wantNoEsc bool
		wantArgs, noArgs       []string
	}{
		{values: "default", wantUID: 65532, wantNoEsc: true, noArgs: []string{"--podconfig"}},
		{values: "agent-images", wantUID: 0, wantNoEsc: true, wantArgs: []string{"--cri-socket=/run/berth/cri/containerd.sock"}, noArgs: []string{"--podconfig"}},
		{values: "podconfig", wantUID: 0, wantAdd: []corev1.Capability{"NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"}, wantHostNet: true,
			wantArgs: []string{"--podconfig", "--cri-socket=/run/berth/cri/containerd.sock"}},
	} {
		t.Run(tc.values, func(t *testing.T) {
			objs, err := Objects(render(t, tc.values).Manifest)
			if err != nil {
				t.Fatal(err)
			}
			var ds *appsv1.DaemonSet
			for _, o := range objs {
				if o.GetKind() == "DaemonSet" {
					ds = &appsv1.DaemonSet{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
						t.Fatal(err)
					}
				}
			}
			if ds == nil {
				t.Fatal("no agent DaemonSet")
			}
			spec := ds.Spec.Template.Spec
			c := spec.Containers[0]
			sc := c.SecurityContext
			if sc == nil || sc.Privileged != nil && *sc.Privileged {
				t.Fatalf("securityContext %+v: privileged", sc)
			}
			if sc.RunAsUser == nil || *sc.RunAsUser != tc.wantUID {
				t.Errorf("runAsUser %v, want %d", sc.RunAsUser, tc.wantUID)
			}
			if tc.wantUID != 0 && (sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot) {
				t.Error("runAsNonRoot not set for the non-root agent")
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Error("root filesystem writable")
			}
			if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("seccomp %+v, want RuntimeDefault", sc.SeccompProfile)
			}
			if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, tc.wantAdd) {
				t.Errorf("capabilities %+v, want drop ALL add %v", sc.Capabilities, tc.wantAdd)
			}
			if esc := sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation; esc != tc.wantNoEsc {
				t.Errorf("allowPrivilegeEscalation=false is %v, want %v", esc, tc.wantNoEsc)
			}
			if spec.HostNetwork != tc.wantHostNet || spec.HostPID {
				t.Errorf("hostNetwork %v hostPID %v, want hostNetwork %v and never hostPID", spec.HostNetwork, spec.HostPID, tc.wantHostNet)
			}
			for _, a := range tc.wantArgs {
				if !slices.Contains(c.Args, a) {
					t.Errorf("args %v lack %s", c.Args, a)
				}
			}
			for _, a := range tc.noArgs {
				if slices.Contains(c.Args, a) {
					t.Errorf("args %v carry %s", c.Args, a)
				}
			}
			for _, m := range c.VolumeMounts {
				if !m.ReadOnly {
					t.Errorf("mount %s is writable", m.MountPath)
				}
			}
		})
	}
}
