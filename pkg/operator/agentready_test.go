package operator

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// The hook returns once every agent on a Ready node is Ready, and otherwise fails naming each
// agent that is not and why: the agent's own /readyz answer where it runs, the pod's waiting
// state and last Warning event where it does not.
func TestWaitAgentsReady(t *testing.T) {
	// An agent answering /readyz as one whose CRI socket is wrong does.
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "images: SocketMissing: CRI socket /run/berth/cri/missing.sock: stat /run/berth/cri/missing.sock: no such file or directory",
			http.StatusServiceUnavailable)
	}))
	defer agent.Close()
	host, portStr, _ := net.SplitHostPort(agent.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	labels := map[string]string{"app.kubernetes.io/name": "berth-agent"}
	ds := func(gen, observed int64, desired, updated int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "berth-system", Name: "berth-agent", Generation: gen},
			Spec:   appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: desired, UpdatedNumberScheduled: updated}}
	}
	agentPod := func(name, node string, ready bool, state corev1.ContainerState) *corev1.Pod {
		cond := corev1.ConditionFalse
		if ready {
			cond = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "berth-system", Name: name, Labels: labels, UID: k8stypes.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{PodIP: host, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", State: state}}}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	creating := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	node := func(name string, ready bool) *corev1.Node {
		s := corev1.ConditionFalse
		if ready {
			s = corev1.ConditionTrue
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}}}
	}
	mountFailed := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "berth-system", Name: "ev-1"}, Type: corev1.EventTypeWarning, Reason: "FailedMount",
		Message:        `MountVolume.SetUp failed for volume "cri-socket-dir" : hostPath type check failed: /run/containerd is not a directory`,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "berth-system", Name: "agent-b", UID: "uid-agent-b"}, LastTimestamp: metav1.Now()}
	for _, tc := range []struct {
		name         string
		objs         []client.Object
		readyAfter   int // polls after which every agent turns Ready (0: never)
		wantErr      []string
		wantNoErrFor string
	}{{
		name: "every agent Ready",
		objs: []client.Object{ds(2, 2, 2, 2), agentPod("agent-a", "n1", true, running), agentPod("agent-b", "n2", true, running), node("n1", true), node("n2", true)},
	}, {
		name: "an agent whose socket is wrong: its /readyz answer",
		objs: []client.Object{ds(1, 1, 2, 2), agentPod("agent-a", "n1", true, running), agentPod("agent-b", "n2", false, running), node("n1", true), node("n2", true)},
		wantErr: []string{"agents of DaemonSet berth-system/berth-agent not Ready: agent-b on n2: /readyz 503: images: SocketMissing: CRI socket /run/berth/cri/missing.sock",
			"agent.criSocket", "deadline exceeded"},
	}, {
		name:    "an agent that cannot start: its waiting state and last Warning event",
		objs:    []client.Object{ds(1, 1, 1, 1), agentPod("agent-b", "n2", false, creating), node("n2", true), mountFailed},
		wantErr: []string{"agent-b on n2: waiting: ContainerCreating; FailedMount: MountVolume.SetUp failed for volume \"cri-socket-dir\" : hostPath type check failed"},
	}, {
		name:    "a rollout that does not finish",
		objs:    []client.Object{ds(3, 2, 2, 1), agentPod("agent-a", "n1", true, running), node("n1", true)},
		wantErr: []string{"rollout: 1 of 2 agents updated"},
	}, {
		name: "an unready agent on a node that is not Ready is not waited for",
		objs: []client.Object{ds(1, 1, 2, 2), agentPod("agent-a", "n1", true, running), agentPod("agent-b", "n2", false, running), node("n1", true), node("n2", false)},
	}, {
		name:       "agents that become Ready after a while",
		objs:       []client.Object{ds(1, 1, 1, 1), agentPod("agent-a", "n1", false, running), node("n1", true)},
		readyAfter: 3,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			scheme, err := Scheme()
			if err != nil {
				t.Fatal(err)
			}
			polls := 0
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objs...).
				WithIndex(&corev1.Event{}, "involvedObject.name", func(o client.Object) []string { return []string{o.(*corev1.Event).InvolvedObject.Name} }).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if err := cl.List(ctx, list, opts...); err != nil {
						return err
					}
					if pods, ok := list.(*corev1.PodList); ok {
						if polls++; tc.readyAfter > 0 && polls >= tc.readyAfter {
							for i := range pods.Items {
								pods.Items[i].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
							}
						}
					}
					return nil
				}}).Build()
			// Long enough that a loaded machine completes a poll before the deadline cuts one short.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err = WaitAgentsReady(ctx, c, AgentReadyOptions{Namespace: "berth-system", DaemonSet: "berth-agent", Port: port, Interval: 10 * time.Millisecond})
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("WaitAgentsReady: %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v\nwant it to contain %q", err, w)
				}
			}
			if tc.readyAfter > 0 && polls < tc.readyAfter {
				t.Errorf("returned after %d polls, before the agents were Ready (poll %d)", polls, tc.readyAfter)
			}
		})
	}
}
