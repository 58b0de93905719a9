package sysched

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// TestRequeueWhenInstalled: a pod refused for a profile not installed is handed back to the
// queue once, when a change of SPO's install states may let it fit, and not for changes that
// cannot, or once it is bound or gone.
func TestRequeueWhenInstalled(t *testing.T) {
	web, db := "SeccompProfile-web", "SeccompProfile-db"
	for _, tc := range []struct {
		name string
		// between runs after the pod was refused on n2 and n3, before the change.
		between func(e *env, pod *v1.Pod)
		change  func(e *env)
		want    bool
	}{
		{name: "installed on a refused node", change: func(e *env) {
			onNodeStatus(e.pl.st, nodeStatus("web-n2", web, "n2", "Installed", false))
		}, want: true},
		{name: "installed on a new node", change: func(e *env) {
			onNodeStatus(e.pl.st, nodeStatus("web-n4", web, "n4", "Installed", false))
		}, want: true},
		{name: "the profile reported on no node any more", change: func(e *env) {
			for _, n := range []string{"web-n1", "web-n2"} {
				e.pl.st.deleteNodeStatus(n)
			}
		}, want: true},
		{name: "one node's report deleted, others left", change: func(e *env) {
			e.pl.st.deleteNodeStatus("web-n2")
		}},
		{name: "still pending", change: func(e *env) {
			onNodeStatus(e.pl.st, nodeStatus("web-n2", web, "n2", "Pending", false))
		}},
		{name: "installed again where it was installed", change: func(e *env) {
			onNodeStatus(e.pl.st, nodeStatus("web-n1", web, "n1", "Installed", false))
		}},
		{name: "another profile installed", change: func(e *env) {
			onNodeStatus(e.pl.st, nodeStatus("db-n2", db, "n2", "Installed", false))
		}},
		{name: "an object moved to another profile, leaving this one unreported", change: func(e *env) {
			e.pl.st.deleteNodeStatus("web-n2")
			onNodeStatus(e.pl.st, nodeStatus("web-n1", db, "n1", "Pending", false))
		}, want: true},
		{name: "bound meanwhile", between: func(e *env, pod *v1.Pod) {
			bound := pod.DeepCopy()
			bound.Spec.NodeName = "n1"
			onPod(e.pl.st, bound)
		}, change: func(e *env) {
			onNodeStatus(e.pl.st, nodeStatus("web-n2", web, "n2", "Installed", false))
		}},
		{name: "finished meanwhile", between: func(e *env, pod *v1.Pod) {
			done := pod.DeepCopy()
			done.Status.Phase = v1.PodFailed
			onPod(e.pl.st, done)
		}, change: func(e *env) {
			onNodeStatus(e.pl.st, nodeStatus("web-n2", web, "n2", "Installed", false))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, shapeCluster, nil, seccompProfile("", "web", "", "read"), seccompProfile("", "db", "", "write"))
			onNodeStatus(e.pl.st, nodeStatus("web-n1", web, "n1", "Installed", false))
			onNodeStatus(e.pl.st, nodeStatus("web-n2", web, "n2", "Pending", false))
			onNodeStatus(e.pl.st, nodeStatus("db-n1", db, "n1", "Installed", false))
			if got := e.takeActivated(); len(got) != 0 {
				t.Fatalf("activated %v with no pod refused", got)
			}
			pod := e.newPod("p", withPodProfile(e.path("", "web")))
			refuse(t, e, pod, "n2", "n3")
			if tc.between != nil {
				tc.between(e, pod)
			}
			tc.change(e)
			got := e.takeActivated()
			if want := [][]string{{"default/p"}}; tc.want && fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("activated %v, want %v", got, want)
			} else if !tc.want && len(got) != 0 {
				t.Fatalf("activated %v, want nothing", got)
			}
			// Handed back once: a second such change finds no one waiting until the pod is
			// refused again.
			onNodeStatus(e.pl.st, nodeStatus("web-n3", web, "n3", "Installed", false))
			if got := e.takeActivated(); tc.want && len(got) != 0 {
				t.Fatalf("activated again: %v", got)
			}
		})
	}
}

// TestRequeueChangeDuringTheCycle: a change that comes after the cycle read the install states
// but before the refused pod was noted cannot find the pod; the cycle hands it back itself.
func TestRequeueChangeDuringTheCycle(t *testing.T) {
	e := newEnv(t, shapeCluster, nil, seccompProfile("", "web", "", "read"))
	onNodeStatus(e.pl.st, nodeStatus("web-n1", "SeccompProfile-web", "n1", "Pending", false))
	pod := e.newPod("p", withPodProfile(e.path("", "web")))
	cs := framework.NewCycleState()
	if _, st := e.pl.PreFilter(context.Background(), cs, pod, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter %v", st)
	}
	// A change of another node's state: it moves the generation with nobody waiting yet.
	onNodeStatus(e.pl.st, nodeStatus("web-n2", "SeccompProfile-web", "n2", "Installed", false))
	if got := e.takeActivated(); len(got) != 0 {
		t.Fatalf("activated %v before any pod was noted", got)
	}
	if st := e.pl.Filter(context.Background(), cs, pod, nodeInfo("n1")); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("n1: %v, want refused", st)
	}
	if got := e.takeActivated(); fmt.Sprint(got) != "[[default/p]]" {
		t.Fatalf("activated %v, want the pod handed back by its own cycle", got)
	}
}

// refuse runs one cycle of pod's PreFilter and Filter over nodes, which must all refuse it.
func refuse(t *testing.T, e *env, pod *v1.Pod, nodes ...string) {
	t.Helper()
	cs := framework.NewCycleState()
	if _, st := e.pl.PreFilter(context.Background(), cs, pod, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter %v", st)
	}
	for _, n := range nodes {
		if st := e.pl.Filter(context.Background(), cs, pod, nodeInfo(n)); st.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("%s: %v, want refused", n, st)
		}
	}
	if got := e.takeActivated(); len(got) != 0 {
		t.Fatalf("activated %v while refusing", got)
	}
}
