package rebalancer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLimited: each limit keeps a candidate in place once reached, the first one reached is
// named, and a candidate under every limit moves.
func TestLimited(t *testing.T) {
	c := PodLoad{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}, controllerUID: "rs"}
	limits := Limits{PerNode: 2, PerRound: 3, PerNamespace: 2, PerOwner: 1}
	for _, tc := range []struct {
		name      string
		moved     int
		total     int
		perNS     map[string]int
		perOwner  map[string]int
		ownerCool map[string]bool
		want      string
	}{
		{name: "under every limit", want: ""},
		{name: "node limit first", moved: 2, total: 3, want: SkipNodeLimit},
		{name: "round limit", moved: 1, total: 3, want: SkipRoundLimit},
		{name: "namespace limit", perNS: map[string]int{"ns": 2}, want: SkipNamespaceLimit},
		{name: "other namespace does not count", perNS: map[string]int{"other": 5}, want: ""},
		{name: "owner limit", perOwner: map[string]int{"rs": 1}, want: SkipOwnerLimit},
		{name: "owner cooldown", ownerCool: map[string]bool{"rs": true}, want: SkipOwnerCooldown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &planRun{Policy: &Policy{Limits: limits}, total: tc.total, perNS: tc.perNS, perOwner: tc.perOwner, ownerCool: tc.ownerCool}
			if got := r.limited(c, tc.moved); got != tc.want {
				t.Errorf("limited = %q, want %q", got, tc.want)
			}
		})
	}
}
