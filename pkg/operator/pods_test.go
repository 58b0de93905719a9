package operator

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestPodProblemNamesWhatTheUserFixes(t *testing.T) {
	ss := testCR()
	waiting := func(name string, labels map[string]string, reason, msg string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ss.Namespace, Labels: labels}}
		st := corev1.ContainerStatus{Name: "scheduler", Image: "registry.example/berth-scheduler:typo"}
		if reason == "" {
			st.State.Running = &corev1.ContainerStateRunning{}
		} else {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
		return p
	}
	other := map[string]string{LabelName: "berth-scheduler", LabelInstance: "another"}
	cases := []struct {
		name       string
		pod        *corev1.Pod
		wantReason string
		wantIn     []string
	}{
		{"image cannot be pulled", waiting("s-1", PodLabels(ss), "ImagePullBackOff", "Back-off pulling image"),
			ReasonImagePullFailed, []string{"s-1", `"registry.example/berth-scheduler:typo"`, "spec.image", "running replicas are kept"}},
		{"image never pulled by policy", waiting("s-2", PodLabels(ss), "ErrImageNeverPull", "image not present with pull policy of Never"),
			ReasonImagePullFailed, []string{"ErrImageNeverPull"}},
		{"scheduler crashes", waiting("s-3", PodLabels(ss), "CrashLoopBackOff", "back-off 10s restarting failed container"),
			ReasonPodsFailing, []string{"s-3", "scheduler", "CrashLoopBackOff"}},
		{"healthy pod", waiting("s-4", PodLabels(ss), "", ""), "", nil},
		{"still creating is not a failure", waiting("s-5", PodLabels(ss), "ContainerCreating", ""), "", nil},
		{"another scheduler's broken pod is not ours", waiting("x-1", other, "ImagePullBackOff", ""), "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scheme, err := Scheme()
			if err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.pod).Build()
			r := &Reconciler{Client: c, APIReader: c}
			reason, msg := r.podProblem(context.Background(), ss)
			if reason != tc.wantReason {
				t.Fatalf("reason = %q (%s), want %q", reason, msg, tc.wantReason)
			}
			for _, want := range tc.wantIn {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
		})
	}
}
