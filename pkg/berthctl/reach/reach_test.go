package reach

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func lease(ns, holder string, renewed time.Time) *coordinationv1.Lease {
	d := int32(15)
	rt := metav1.NewMicroTime(renewed)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "berth-scheduler"},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &d, RenewTime: &rt}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	return l
}

func TestHolder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lease   *coordinationv1.Lease
		want    string
		err     string
		expired bool
	}{
		{"held", lease("berth-system", "sched-abc_1", now.Add(-5*time.Second)), "sched-abc_1", "", false},
		{"nobody", lease("berth-system", "", now), "", "has no holder", false},
		{"expired", lease("berth-system", "sched-abc_1", now.Add(-time.Minute)), "", "expired at 2026-11-24T11:59:15Z", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Holder(tc.lease, now)
			if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Holder = %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
			var ex *ExpiredLeaseError
			if errors.As(err, &ex) != tc.expired {
				t.Errorf("ExpiredLeaseError %v, want %v", errors.As(err, &ex), tc.expired)
			}
		})
	}
}

func TestFindLeaseAndLeaderPod(t *testing.T) {
	client := fake.NewClientset(lease("kube-system", "sched-abc_1", now),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "sched-abc"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "sched-old"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}})
	ctx := context.Background()
	// The first namespace lacks it: the search goes on, in order.
	l, err := FindLease(ctx, client, []string{"berth-system", "kube-system"}, "berth-scheduler")
	if err != nil || l.Namespace != "kube-system" {
		t.Fatalf("FindLease = %v, %v", l, err)
	}
	var nl *NoLeaseError
	if _, err := FindLease(ctx, client, []string{"berth-system"}, "berth-scheduler"); !errors.As(err, &nl) ||
		!strings.Contains(err.Error(), `no Lease "berth-scheduler" in berth-system`) {
		t.Errorf("missing Lease: %v", err)
	}
	for _, tc := range []struct{ holder, err string }{
		{"sched-abc_1", ""},
		{"sched-old_2", "is Failed, not Running"},
		{"laptop_3", "is not a pod in kube-system (a scheduler running outside the cluster?)"},
	} {
		p, err := LeaderPod(ctx, client, "kube-system", "berth-scheduler", tc.holder)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("LeaderPod(%s) = %v, %v; want %q", tc.holder, p, err, tc.err)
		}
	}
}
