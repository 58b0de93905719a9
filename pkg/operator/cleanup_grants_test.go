package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// TestCleanupGrants: the uninstall hook deletes every Grants object only after the operator,
// their only writer, is stopped (else it would write them again), and only when asked.
func TestCleanupGrants(t *testing.T) {
	for _, tc := range []struct {
		name       string
		grants     bool
		wantEvents string
		wantLeft   int
	}{
		{"asked: deleted after the operator's pods are gone", true, "scale berth-operator; operator pods gone; delete Grants grants; delete Grants grants", 0},
		{"not asked (grants.enabled false): left alone", false, "scale berth-operator; operator pods gone", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ctx := cleanupAfterOperator(t, CleanupOptions{Grants: tc.grants}, tc.wantEvents,
				&berthv1alpha1.Grants{ObjectMeta: metav1.ObjectMeta{Namespace: "blue", Name: berthv1alpha1.GrantsName}},
				&berthv1alpha1.Grants{ObjectMeta: metav1.ObjectMeta{Namespace: "red", Name: berthv1alpha1.GrantsName}})
			var l berthv1alpha1.GrantsList
			if err := c.List(ctx, &l, client.InNamespace("")); err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != tc.wantLeft {
				t.Errorf("%d Grants left, want %d", len(l.Items), tc.wantLeft)
			}
		})
	}
}

// cleanupAfterOperator runs the uninstall hook with o's switches on a simulated cluster holding
// the operator (its Deployment and a pod) and objs, and checks its steps against wantEvents
// (the Lease deletions, its last step, and the simulator's "agent pods gone", there being no
// agent DaemonSet, left out). It returns the client to read what is left.
func cleanupAfterOperator(t *testing.T, o CleanupOptions, wantEvents string, objs ...client.Object) (client.Client, context.Context) {
	t.Helper()
	opLabels := map[string]string{"app.kubernetes.io/name": "berth-operator", "app.kubernetes.io/instance": "berth"}
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	sim := &nodeSim{t: t, operatorLabels: opLabels, agentLabels: map[string]string{"none": "none"}}
	c := sim.client(scheme, append([]client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "berth-operator", Namespace: "berth-system"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: opLabels}}},
		pod("operator-0", opLabels)}, objs...)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	t.Cleanup(cancel)
	o.Namespace, o.OperatorDeployment, o.OperatorLease, o.Interval = "berth-system", "berth-operator", "berth-operator", 5*time.Millisecond
	if err := Cleanup(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, e := range sim.events {
		if !strings.HasPrefix(e, "delete Lease") && e != "agent pods gone" {
			events = append(events, e)
		}
	}
	if got := strings.Join(events, "; "); got != wantEvents {
		t.Errorf("events:\n got %s\nwant %s", got, wantEvents)
	}
	return c, ctx
}
