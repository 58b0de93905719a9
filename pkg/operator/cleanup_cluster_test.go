package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

// nodeSim simulates, behind a fake client, the parts of a cluster the PodConfig and NodeImages
// steps of the hook depend on: the operator removes a deleted PodConfig's finalizer a few polls
// later (its agents took the links down) unless stuck; the ReplicaSet controller removes the
// operator's pods after the scale to 0; the garbage collector removes the agent pods after
// their DaemonSet is gone, unless stuck. It records the events in order and every violation of
// the hook's rules.
type nodeSim struct {
	t                               *testing.T
	stuckPodConfig, stuckAgents     bool
	pcPolls, zeroPolls, dsGonePolls int
	events, violations              []string
	operatorLabels, agentLabels     map[string]string
	operatorScaled, podConfigsOn    bool
}

func (s *nodeSim) event(e string) { s.events = append(s.events, e) }

func (s *nodeSim) count(ctx context.Context, cl client.Client, l map[string]string) int {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace("berth-system"), client.MatchingLabels(l)); err != nil {
		s.t.Error(err)
	}
	return len(pods.Items)
}

func (s *nodeSim) deletePods(ctx context.Context, cl client.Client, l map[string]string) {
	if err := cl.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("berth-system"), client.MatchingLabels(l)); err != nil {
		s.t.Error(err)
	}
}

func (s *nodeSim) podConfigs(ctx context.Context, cl client.Client) []berthv1alpha1.PodConfig {
	if !s.podConfigsOn {
		return nil // the hook is not asked to care about PodConfigs, or the kind is not served
	}
	var list berthv1alpha1.PodConfigList
	if err := cl.List(ctx, &list); err != nil {
		s.t.Error(err)
	}
	return list.Items
}

// tickPodConfigs is the operator: a few polls after a PodConfig is deleted, its finalizer goes.
func (s *nodeSim) tickPodConfigs(ctx context.Context, cl client.Client) {
	for _, pc := range s.podConfigs(ctx, cl) {
		if pc.DeletionTimestamp.IsZero() {
			continue
		}
		if s.pcPolls++; s.pcPolls >= polls && !s.stuckPodConfig && !s.operatorScaled {
			pc.Finalizers = nil
			if err := cl.Update(ctx, &pc); err != nil {
				s.t.Error(err)
			}
			s.event("operator released PodConfig " + pc.Namespace + "/" + pc.Name)
		}
	}
}

// tickPods is the ReplicaSet controller and the garbage collector.
func (s *nodeSim) tickPods(ctx context.Context, cl client.Client) {
	d := &appsv1.Deployment{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "berth-system", Name: "berth-operator"}, d); err == nil && *d.Spec.Replicas == 0 {
		if s.zeroPolls++; s.zeroPolls == polls {
			s.deletePods(ctx, cl, s.operatorLabels)
			s.event("operator pods gone")
		}
	}
	err := cl.Get(ctx, client.ObjectKey{Namespace: "berth-system", Name: "berth-agent"}, &appsv1.DaemonSet{})
	if apierrors.IsNotFound(err) {
		if s.dsGonePolls++; s.dsGonePolls == polls && !s.stuckAgents {
			s.deletePods(ctx, cl, s.agentLabels)
			s.event("agent pods gone")
		}
	}
}

func (s *nodeSim) client(scheme *runtime.Scheme, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			switch l := list.(type) {
			case *corev1.PodList:
				s.tickPods(ctx, cl)
			case *unstructured.UnstructuredList:
				if l.GetKind() == "PodConfigList" {
					s.tickPodConfigs(ctx, cl)
				}
			}
			return cl.List(ctx, list, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			switch o.(type) {
			case *appsv1.Deployment:
				s.event("scale " + o.GetName())
				s.operatorScaled = true
				if n := len(s.podConfigs(ctx, cl)); n > 0 {
					s.violations = append(s.violations, fmt.Sprintf("operator stopped with %d PodConfigs left", n))
				}
			case *metav1.PartialObjectMetadata:
				s.event("release " + o.GetObjectKind().GroupVersionKind().Kind + " " + o.GetName())
				if n := s.count(ctx, cl, s.operatorLabels); n > 0 {
					s.violations = append(s.violations, fmt.Sprintf("PodNetwork released with %d operator pods left", n))
				}
			}
			return cl.Patch(ctx, o, p, opts...)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			kind := o.GetObjectKind().GroupVersionKind().Kind
			switch o.(type) {
			case *unstructured.Unstructured:
				s.event("delete " + kind + " " + o.GetNamespace() + "/" + o.GetName())
			case *appsv1.DaemonSet:
				s.event("delete DaemonSet " + o.GetName())
				if len(s.podConfigs(ctx, cl)) > 0 {
					s.violations = append(s.violations, "agents stopped while PodConfigs (whose links they remove) are left")
				}
			case *metav1.PartialObjectMetadata:
				s.event("delete " + kind + " " + o.GetName())
				if n := s.count(ctx, cl, s.agentLabels); kind == "NodeImages" && n > 0 {
					s.violations = append(s.violations, fmt.Sprintf("NodeImages deleted with %d agent pods left", n))
				}
				if n := s.count(ctx, cl, s.operatorLabels); kind == "IPAllocation" && n > 0 {
					s.violations = append(s.violations, fmt.Sprintf("IPAllocation deleted with %d operator pods left", n))
				}
			}
			return cl.Delete(ctx, o, opts...)
		},
	}).Build()
}

func podConfig(ns, name string, conds ...metav1.Condition) *berthv1alpha1.PodConfig {
	return &berthv1alpha1.PodConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{berthv1alpha1.PodConfigFinalizer}},
		Status: berthv1alpha1.PodConfigStatus{Conditions: conds}}
}

// The hook deletes PodConfigs while the operator and the agents run and waits for them; only
// then does it stop the operator, release the networks, stop the agents and delete NodeImages.
// A PodConfig that does not go stops the hook with its name and status before anything else is
// touched; agents that do not stop keep the NodeImages.
func TestCleanupPodConfigsAndNodeImages(t *testing.T) {
	opLabels := map[string]string{"app.kubernetes.io/name": "berth-operator", "app.kubernetes.io/instance": "berth"}
	agentLabels := map[string]string{"app.kubernetes.io/name": "berth-agent", "app.kubernetes.io/instance": "berth"}
	opts := CleanupOptions{Namespace: "berth-system", OperatorDeployment: "berth-operator", OperatorLease: "berth-operator",
		PodConfigs: true, AgentDaemonSet: "berth-agent", NodeImages: true, Interval: 5 * time.Millisecond}
	full, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	// A cluster where only the SecondaryScheduler CRD is installed (no PodConfig, PodNetwork,
	// IPAllocation or NodeImages kinds served).
	onlySS := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(onlySS); err != nil {
		t.Fatal(err)
	}
	onlySS.AddKnownTypes(berthv1alpha1.GroupVersion, &berthv1alpha1.SecondaryScheduler{}, &berthv1alpha1.SecondarySchedulerList{})
	metav1.AddToGroupVersion(onlySS, berthv1alpha1.GroupVersion)

	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Removing", Message: "1 of 2 pods' links still being removed on berth-real"}
	degraded := metav1.Condition{Type: "Degraded", Status: metav1.ConditionTrue, Reason: "AgentError", Message: "pod a: link net1: operation not permitted"}
	for _, tc := range []struct {
		name                        string
		scheme                      *runtime.Scheme
		stuckPodConfig, stuckAgents bool
		opts                        func(CleanupOptions) CleanupOptions
		wantErr                     []string
		wantEvents                  []string
		wantLeft                    []string // objects left afterwards, as kind/name
	}{{
		name: "everything goes, in order",
		wantEvents: []string{"delete PodConfig cnf/a", "delete PodConfig tenant/b", "operator released PodConfig cnf/a",
			"operator released PodConfig tenant/b", "scale berth-operator", "operator pods gone", "release PodNetwork net-a",
			"delete IPAllocation net-a", "delete DaemonSet berth-agent", "agent pods gone", "delete NodeImages berth-real", "delete NodeImages node-2"},
		wantLeft: []string{"PodNetwork/net-a", "PodNetwork/net-b"},
	}, {
		name: "a PodConfig that does not go: named with its status, the operator keeps running", stuckPodConfig: true,
		wantErr: []string{"PodConfigs still present", "cnf/a [Ready=False (Removing): 1 of 2 pods' links still being removed on berth-real; " +
			"Degraded=True (AgentError): pod a: link net1: operation not permitted; finalizers berth.dev/podconfig]",
			"tenant/b [no Ready or Degraded condition: no operator has handled it; finalizers berth.dev/podconfig]", "deadline exceeded"},
		wantEvents: []string{"delete PodConfig cnf/a", "delete PodConfig tenant/b"},
		wantLeft: []string{"IPAllocation/net-a", "NodeImages/berth-real", "NodeImages/node-2", "PodConfig/cnf/a", "PodConfig/tenant/b",
			"PodNetwork/net-a", "PodNetwork/net-b"},
	}, {
		name: "agents that do not stop: NodeImages kept", stuckAgents: true,
		wantErr: []string{"agent pods of DaemonSet berth-agent still in berth-system: agent-0", "deadline exceeded"},
		wantEvents: []string{"delete PodConfig cnf/a", "delete PodConfig tenant/b", "operator released PodConfig cnf/a",
			"operator released PodConfig tenant/b", "scale berth-operator", "operator pods gone", "release PodNetwork net-a",
			"delete IPAllocation net-a", "delete DaemonSet berth-agent"},
		wantLeft: []string{"NodeImages/berth-real", "NodeImages/node-2", "PodNetwork/net-a", "PodNetwork/net-b"},
	}, {
		name: "PodConfigs off (podConfig.enabled false): PodConfigs, networks and allocations untouched",
		opts: func(o CleanupOptions) CleanupOptions { o.PodConfigs = false; return o },
		wantEvents: []string{"scale berth-operator", "operator pods gone", "delete DaemonSet berth-agent", "agent pods gone",
			"delete NodeImages berth-real", "delete NodeImages node-2"},
		wantLeft: []string{"IPAllocation/net-a", "PodConfig/cnf/a", "PodConfig/tenant/b", "PodNetwork/net-a", "PodNetwork/net-b"},
	}, {
		name:       "kinds not served (CRDs absent): nothing to delete, no error",
		scheme:     onlySS,
		wantEvents: []string{"scale berth-operator", "operator pods gone", "delete DaemonSet berth-agent", "agent pods gone"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := full
			if tc.scheme != nil {
				scheme = tc.scheme
			}
			o := opts
			if tc.opts != nil {
				o = tc.opts(o)
			}
			sim := &nodeSim{t: t, stuckPodConfig: tc.stuckPodConfig, stuckAgents: tc.stuckAgents, operatorLabels: opLabels, agentLabels: agentLabels,
				podConfigsOn: o.PodConfigs && tc.scheme == nil}
			objs := []client.Object{
				&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "berth-operator", Namespace: "berth-system"},
					Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: opLabels}}},
				&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "berth-agent", Namespace: "berth-system"},
					Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: agentLabels}}},
				pod("operator-0", opLabels), pod("agent-0", agentLabels), pod("agent-1", agentLabels),
			}
			if tc.scheme == nil {
				objs = append(objs,
					podConfig("cnf", "a", ready, degraded), podConfig("tenant", "b"),
					&berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "net-a", Finalizers: []string{berthv1alpha1.PodNetworkFinalizer}}},
					&berthv1alpha1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "net-b"}},
					&berthv1alpha1.IPAllocation{ObjectMeta: metav1.ObjectMeta{Name: "net-a"}},
					&berthv1alpha1.NodeImages{ObjectMeta: metav1.ObjectMeta{Name: "berth-real"}},
					&berthv1alpha1.NodeImages{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}})
			}
			c := sim.client(scheme, objs...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := Cleanup(ctx, c, o)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v\nwant it to contain %q", err, w)
				}
			}
			if got, want := strings.Join(sim.events, "; "), strings.Join(tc.wantEvents, "; "); got != want {
				t.Errorf("events:\n got %s\nwant %s", got, want)
			}
			for _, v := range sim.violations {
				t.Error(v)
			}
			if tc.scheme == nil {
				if got, want := strings.Join(left(t, c), ", "), strings.Join(tc.wantLeft, ", "); got != want {
					t.Errorf("left:\n got %s\nwant %s", got, want)
				}
				pn := &berthv1alpha1.PodNetwork{}
				if err := c.Get(context.Background(), client.ObjectKey{Name: "net-a"}, pn); err == nil && (tc.stuckPodConfig || !o.PodConfigs) != (len(pn.Finalizers) > 0) {
					t.Errorf("PodNetwork net-a finalizers %v after the hook (stuck PodConfig %v, PodConfigs %v)", pn.Finalizers, tc.stuckPodConfig, o.PodConfigs)
				}
			}
			if err != nil {
				return
			}
			// Idempotent: a retried hook finds nothing of these left and succeeds.
			sim.events = nil
			if err := Cleanup(ctx, c, o); err != nil {
				t.Errorf("second run: %v", err)
			}
			for _, e := range sim.events {
				if e != "delete DaemonSet berth-agent" && !strings.HasPrefix(e, "delete Lease") {
					t.Errorf("second run did %q", e)
				}
			}
		})
	}
}

// A PodConfig created while the operator was being stopped fails the hook, naming it.
func TestCleanupPodConfigCreatedMeanwhile(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	opLabels := map[string]string{"app.kubernetes.io/name": "berth-operator"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "berth-operator", Namespace: "berth-system"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: opLabels}}},
	).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := cl.Create(ctx, podConfig("late", "c")); err != nil {
				t.Error(err)
			}
			return cl.Patch(ctx, o, p, opts...)
		},
	}).Build()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = Cleanup(ctx, c, CleanupOptions{Namespace: "berth-system", OperatorDeployment: "berth-operator", OperatorLease: "berth-operator",
		PodConfigs: true, Interval: 5 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "PodConfigs created while the operator was being stopped: late/c [") {
		t.Fatalf("got %v, want an error naming late/c", err)
	}
}

// left lists the PodConfigs, PodNetworks, IPAllocations and NodeImages in the fake cluster.
func left(t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	var pcs berthv1alpha1.PodConfigList
	var pns berthv1alpha1.PodNetworkList
	var ipas berthv1alpha1.IPAllocationList
	var nis berthv1alpha1.NodeImagesList
	for _, l := range []client.ObjectList{&ipas, &nis, &pcs, &pns} {
		if err := c.List(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range ipas.Items {
		out = append(out, "IPAllocation/"+o.Name)
	}
	for _, o := range nis.Items {
		out = append(out, "NodeImages/"+o.Name)
	}
	for _, o := range pcs.Items {
		out = append(out, "PodConfig/"+o.Namespace+"/"+o.Name)
	}
	for _, o := range pns.Items {
		out = append(out, "PodNetwork/"+o.Name)
	}
	return out
}
