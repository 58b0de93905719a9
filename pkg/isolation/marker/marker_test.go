package marker

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/isolation/classmarker"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

var t0 = time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)

func node(name string, created time.Time, labels map[string]string) *corev1.Node {
	l := map[string]string{"ipp": "true"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, CreationTimestamp: metav1.NewTime(created)}}
}

func marked(v string) map[string]string { return map[string]string{classmarker.Key: v} }

func TestDecide(t *testing.T) {
	grace := 2 * time.Minute
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		classes []string
		since   time.Time
		want    Decision
	}{
		{name: "first class lands", classes: []string{"red/a"}, since: t0, want: Decision{Set: "red_a"}},
		{name: "marker already right", labels: marked("red_a"), classes: []string{"red/a"}, since: t0},
		{name: "stale marker of another class", labels: marked("blue_a"), classes: []string{"red/a"}, since: t0, want: Decision{Set: "red_a"}},
		{name: "shared class", classes: []string{"gold (shared)"}, since: t0, want: Decision{Set: "gold"}},
		{name: "empty, no marker", since: t0.Add(-time.Hour)},
		{name: "empty within grace (Karpenter's new node waits for its pod)", labels: marked("red_a"), since: t0.Add(-30 * time.Second), want: Decision{Wait: 90 * time.Second}},
		{name: "empty past grace", labels: marked("red_a"), since: t0.Add(-grace), want: Decision{Remove: true}},
		{name: "several classes: left, reported", labels: marked("red_a"), classes: []string{"blue/b", "red/a"}, since: t0, want: Decision{Classes: []string{"blue/b", "red/a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(node("n", t0.Add(-time.Hour), tc.labels), tc.classes, tc.since, t0, grace)
			if got.Set != tc.want.Set || got.Remove != tc.want.Remove || got.Wait != tc.want.Wait || strings.Join(got.Classes, ",") != strings.Join(tc.want.Classes, ",") {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func pod(ns, name, nodeName string, labels map[string]string, mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if mod != nil {
		mod(p)
	}
	return p
}

func TestClasses(t *testing.T) {
	c := webhook.Defaults()
	red := map[string]string{"ipp-class": "a"}
	ds := func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "d"}} }
	for _, tc := range []struct {
		name   string
		pods   []*corev1.Pod
		grants webhook.StaticGrants
		want   string
	}{
		{name: "one owned class", pods: []*corev1.Pod{pod("red", "p", "n", red, nil), pod("red", "q", "n", map[string]string{"berth.dev/instance-class": "a"}, nil)}, want: "red/a"},
		{name: "same value, two namespaces: two classes", pods: []*corev1.Pod{pod("red", "p", "n", red, nil), pod("blue", "p", "n", red, nil)}, want: "blue/a,red/a"},
		{name: "same value shared by an InstanceClass: one class", grants: webhook.StaticGrants{"a": {"red", "blue"}},
			pods: []*corev1.Pod{pod("red", "p", "n", red, nil), pod("blue", "p", "n", red, nil)}, want: "a (shared)"},
		{name: "not counted: DaemonSet, mirror, exempt, finished, unclassed, empty class", pods: []*corev1.Pod{
			pod("red", "ds", "n", red, ds),
			pod("red", "mirror", "n", red, func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "n"}} }),
			pod("kube-system", "sys", "n", red, nil),
			pod("red", "done", "n", red, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			pod("red", "failed", "n", red, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			pod("red", "plain", "n", map[string]string{"app": "x"}, nil),
			pod("red", "empty", "n", map[string]string{"ipp-class": ""}, nil),
		}},
		{name: "pending and terminating pods count", pods: []*corev1.Pod{
			pod("red", "p", "n", red, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
			pod("red", "q", "n", red, func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }),
		}, want: "red/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pods []corev1.Pod
			for _, p := range tc.pods {
				pods = append(pods, *p)
			}
			var g webhook.ClassGrants
			if tc.grants != nil {
				g = tc.grants
			}
			got, err := Classes(pods, &c, g)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != tc.want {
				t.Fatalf("classes %q, want %q", got, tc.want)
			}
		})
	}
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := berthv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReconcile: the writer against a fake client: what it writes, that it writes only the one
// label with a merge patch, the grace after the last pod and after its own start, the Warning
// Event on a shared node, and nodes outside the pool.
func TestReconcile(t *testing.T) {
	red := map[string]string{"ipp-class": "a"}
	type step struct {
		at        time.Duration // after t0
		pods      []*corev1.Pod
		wantLabel string // "" absent
		requeue   time.Duration
		event     string
	}
	for _, tc := range []struct {
		name    string
		node    *corev1.Node
		classes []*berthv1alpha1.InstanceClass
		steps   []step
	}{
		{name: "class lands, leaves, marker goes after the grace", node: node("n", t0.Add(-time.Hour), nil), steps: []step{
			{pods: []*corev1.Pod{pod("red", "p", "n", red, nil)}, wantLabel: "red_a"},
			// why: the grace counts from when the writer saw the node empty (step 1), not from
			// the last event that showed the pod (step 0).
			{at: time.Minute, wantLabel: "red_a", requeue: 2 * time.Minute},
			{at: 2*time.Minute + 59*time.Second, wantLabel: "red_a", requeue: time.Second},
			{at: 3 * time.Minute, wantLabel: ""},
		}},
		{name: "restart: stale marker of the wrong class repaired at once", node: node("n", t0.Add(-time.Hour), marked("blue_b")), steps: []step{
			{pods: []*corev1.Pod{pod("red", "p", "n", red, nil)}, wantLabel: "red_a"},
		}},
		{name: "restart: stale marker on an empty node removed a grace after the writer's start", node: node("n", t0.Add(-time.Hour), marked("blue_b")), steps: []step{
			{wantLabel: "blue_b", requeue: 2 * time.Minute},
			{at: 2 * time.Minute, wantLabel: ""},
		}},
		{name: "new node made for a class keeps its marker until the pod arrives", node: node("n", t0.Add(10*time.Second), marked("red_a")), steps: []step{
			// why: the writer started at t0, the node 10 s later: the grace counts from the node.
			{wantLabel: "red_a", requeue: 130 * time.Second},
			{at: 20 * time.Second, wantLabel: "red_a", requeue: 110 * time.Second},
			{at: time.Minute, pods: []*corev1.Pod{pod("red", "p", "n", red, nil)}, wantLabel: "red_a"},
		}},
		{name: "shared class by an InstanceClass", node: node("n", t0.Add(-time.Hour), nil),
			classes: []*berthv1alpha1.InstanceClass{{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: berthv1alpha1.InstanceClassSpec{Namespaces: []string{"red", "blue"}}}},
			steps:   []step{{pods: []*corev1.Pod{pod("red", "p", "n", red, nil), pod("blue", "p", "n", red, nil)}, wantLabel: "a"}}},
		{name: "two classes: label kept, Warning event", node: node("n", t0.Add(-time.Hour), marked("red_a")), steps: []step{
			{pods: []*corev1.Pod{pod("red", "p", "n", red, nil), pod("blue", "p", "n", red, nil)}, wantLabel: "red_a",
				event: "Warning InstanceClassesShareNode pods of instance classes blue/a, red/a run on this node"},
		}},
		{name: "node outside the pool with a marker loses it after the grace", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: marked("red_a"),
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))}}, steps: []step{
			{wantLabel: "red_a", requeue: 2 * time.Minute}, {at: 2 * time.Minute, wantLabel: ""},
		}},
		{name: "pool node by taint alone", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "ipp", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}, steps: []step{
			{pods: []*corev1.Pod{pod("red", "p", "n", red, nil)}, wantLabel: "red_a"},
		}},
		{name: "plain node: nothing", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, steps: []step{{pods: []*corev1.Pod{pod("red", "p", "n", red, nil)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tc.node}
			for _, ic := range tc.classes {
				objs = append(objs, ic)
			}
			var patches []string
			c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).
				WithIndex(&corev1.Pod{}, nodeIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
				WithInterceptorFuncs(interceptor.Funcs{
					Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
						data, _ := patch.Data(obj)
						patches = append(patches, string(patch.Type())+" "+string(data))
						return cl.Patch(ctx, obj, patch, opts...)
					},
					Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
						t.Fatal("the writer updated a whole object; it may only patch the marker")
						return nil
					},
				}).Build()
			rec := events.NewFakeRecorder(10)
			now := t0
			r := &Reconciler{Client: c, Config: webhook.Defaults(), Grace: 2 * time.Minute, Recorder: rec, Now: func() time.Time { return now }}
			var have []*corev1.Pod
			for i, s := range tc.steps {
				now = t0.Add(s.at)
				for _, p := range have {
					_ = c.Delete(context.Background(), p)
				}
				have = nil
				for _, p := range s.pods {
					p := p.DeepCopy()
					if err := c.Create(context.Background(), p); err != nil {
						t.Fatal(err)
					}
					have = append(have, p)
				}
				res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}})
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				var n corev1.Node
				if err := c.Get(context.Background(), types.NamespacedName{Name: "n"}, &n); err != nil {
					t.Fatal(err)
				}
				if got := n.Labels[classmarker.Key]; got != s.wantLabel {
					t.Fatalf("step %d: marker %q, want %q", i, got, s.wantLabel)
				}
				if res.RequeueAfter != s.requeue {
					t.Fatalf("step %d: requeue after %s, want %s", i, res.RequeueAfter, s.requeue)
				}
				select {
				case e := <-rec.Events:
					if s.event == "" || !strings.HasPrefix(e, s.event) {
						t.Fatalf("step %d: event %q, want %q", i, e, s.event)
					}
				default:
					if s.event != "" {
						t.Fatalf("step %d: no event, want %q", i, s.event)
					}
				}
			}
			for _, p := range patches {
				if !strings.HasPrefix(p, "application/merge-patch+json {\"metadata\":{\"labels\":{\""+classmarker.Key+"\":") {
					t.Errorf("patch %s: want a merge patch of the marker alone", p)
				}
			}
		})
	}
}
