package operator

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

func TestNeverAdoptsAUsersObject(t *testing.T) {
	ss := testCR()
	owned := ConfigMap(ss, &schedconfig.Rendered{Hash: "h"})
	cases := []struct {
		name     string
		existing client.Object
		wantErr  string
	}{
		{"nothing there yet", nil, ""},
		{"already ours", owned.DeepCopy(), ""},
		{"a user's ConfigMap of the same name",
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owned.Name, Namespace: owned.Namespace}, Data: map[string]string{"k": "v"}},
			"ConfigMap berth-system/s-config exists and is not managed by SecondaryScheduler berth-system/s"},
		{"owned by another resource",
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owned.Name, Namespace: owned.Namespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "berth.dev/v1alpha1", Kind: "SecondaryScheduler", Name: "other", UID: "uid-2", Controller: ptrTo(true)}}}},
			"not managed by"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{Client: fakeClient(t, tc.existing)}
			err := r.checkNotAdopting(context.Background(), ss, owned)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestRawConfigMapMayNotBeTheRenderedOne(t *testing.T) {
	ss := testCR()
	ss.Spec.ConfigMapRef = &berthv1alpha1.ConfigMapKeyReference{Name: ConfigMapName(ss)}
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(ss), Namespace: ss.Namespace},
		Data:       map[string]string{ConfigKey: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"},
	}).Build()
	r := &Reconciler{Client: c}
	status := &berthv1alpha1.SecondarySchedulerStatus{}
	if err := r.manage(context.Background(), ss, status); err != nil {
		t.Fatal(err)
	}
	d := meta.FindStatusCondition(status.Conditions, berthv1alpha1.ConditionDegraded)
	if d == nil || d.Status != metav1.ConditionTrue || d.Reason != ReasonInvalidConfiguration || !strings.Contains(d.Message, "spec.configMapRef.name") {
		t.Fatalf("Degraded = %+v, want InvalidConfiguration naming spec.configMapRef.name", d)
	}
	var list corev1.ConfigMapList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Data[ConfigKey] != "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" {
		t.Errorf("the user's ConfigMap was changed: %+v", list.Items)
	}
}

func ptrTo[T any](v T) *T { return &v }
