package framework

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// StandInLeader takes the Lease ns/name for holder, renewed now and valid for an hour, as the
// elected replica of a scheduler would. Suites whose scheduler pods only "run" on simulated
// nodes use it to play the leader those pods cannot be.
func StandInLeader(ctx context.Context, cs kubernetes.Interface, ns, name, holder string) error {
	now := metav1.NewMicroTime(time.Now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](3600),
		AcquireTime: &now, RenewTime: &now}
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec = spec
	_, err = cs.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
	return err
}
