package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestNoLeaderSaysWhyNoReplicaSchedules(t *testing.T) {
	ss := testCR()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Duration, seconds int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ss.Namespace, Name: LeaseName(ss)}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		if seconds > 0 {
			l.Spec.LeaseDurationSeconds = ptr.To(seconds)
			l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-renewed)}
		}
		return l
	}
	cases := []struct {
		name   string
		lease  *coordinationv1.Lease
		reader bool
		want   []string // empty: a leader holds it
	}{
		{"fresh lease held", lease("sched-abc_1", 3*time.Second, 15), true, nil},
		{"renewed just inside the duration", lease("sched-abc_1", 14*time.Second, 15), true, nil},
		{"no lease yet", nil, true, []string{"no replica has taken Lease", LeaseName(ss)}},
		{"released lease", lease("", 0, 0), true, []string{"has no holder"}},
		{"holder never renewed", lease("sched-abc_1", 0, 0), true, []string{"never renewed", "sched-abc_1"}},
		{"holder stopped renewing", lease("sched-abc_1", 75*time.Second, 15), true, []string{"expired 1m0s ago", "sched-abc_1"}},
		{"no API reader: not checked", nil, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.lease != nil {
				objs = append(objs, tc.lease)
			}
			c := fakeClient(t, objs...)
			r := &Reconciler{Client: c}
			if tc.reader {
				r.APIReader = c
			}
			got := r.noLeader(context.Background(), ss, now)
			if len(tc.want) == 0 {
				if got != "" {
					t.Fatalf("noLeader = %q, want a leader", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("noLeader = %q, lacks %q", got, w)
				}
			}
		})
	}
}

// A read error is not evidence that the scheduler is down: the replicas' word stands.
func TestNoLeaderTrustsReplicasWhenTheLeaseCannotBeRead(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Client: c, APIReader: failingReader{c}}
	if got := r.noLeader(context.Background(), testCR(), time.Now()); got != "" {
		t.Fatalf("noLeader = %q on a read error, want no verdict", got)
	}
}

type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return context.DeadlineExceeded
}
