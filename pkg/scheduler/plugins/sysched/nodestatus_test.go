package sysched

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/profiles"
)

// nodeStatus is a SecurityProfileNodeStatus in SPO's <= v0.10 shape (top-level nodeName and
// status) or, with v1, its v1 shape (spec.nodeName, status.status).
func nodeStatus(name, profileID, node, state string, v1 bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": profiles.Group + "/v1alpha1", "kind": "SecurityProfileNodeStatus",
		"metadata": map[string]interface{}{"name": name, "labels": map[string]interface{}{
			profiles.ProfileIDLabel: profileID, "spo.x-k8s.io/profile-kind": "SeccompProfile", "spo.x-k8s.io/node-name": node}},
	}}
	if v1 {
		u.Object["spec"] = map[string]interface{}{"nodeName": node}
		u.Object["status"] = map[string]interface{}{"status": state}
	} else {
		u.Object["nodeName"] = node
		u.Object["status"] = state
	}
	return u
}

// A node where SPO says the pod's profile is not Installed is refused, naming the profile, the
// state and the node; a profile SPO reports nothing for, or the filter switched off, refuses
// nothing; both SPO shapes are read; malformed objects are left out.
func TestFilterNotInstalled(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name    string
		args    *Args
		profile string // the pod's profile
		want    map[string]string
		skipped bool
	}{
		{name: "installed, pending, missing", profile: "web", want: map[string]string{
			"n1": "", "n2": "seccomp profile SeccompProfile-web is Pending on node n2, not Installed",
			"n3": "seccomp profile SeccompProfile-web is not installed on node n3"}},
		{name: "a profile SPO reports nothing for: no filter", profile: "db", skipped: true},
		{name: "switched off", args: &Args{FilterNotInstalled: &off}, profile: "web", skipped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args != nil {
				var err error
				if args, err = ParseArgs(args); err != nil {
					t.Fatal(err)
				}
			}
			e := newEnv(t, shapeCluster, args, seccompProfile("", "web", "", "read"), seccompProfile("", "db", "", "write"))
			onNodeStatus(e.pl.st, nodeStatus("web-n1", "SeccompProfile-web", "n1", "Installed", false))
			onNodeStatus(e.pl.st, nodeStatus("web-n2", "SeccompProfile-web", "n2", "Pending", true))
			onNodeStatus(e.pl.st, nodeStatus("broken", "", "n3", "Installed", false)) // no profile id: left out
			pod := e.newPod("p", withPodProfile(e.path("", tc.profile)))
			cs := framework.NewCycleState()
			_, st := e.pl.PreFilter(context.Background(), cs, pod, nil)
			if tc.skipped {
				if !st.IsSkip() {
					t.Fatalf("PreFilter %v, want Skip", st)
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("PreFilter %v", st)
			}
			for node, want := range tc.want {
				got := e.pl.Filter(context.Background(), cs, pod, nodeInfo(node))
				switch {
				case want == "" && !got.IsSuccess():
					t.Errorf("%s refused: %v", node, got)
				case want != "" && (got.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(got.Message(), want)):
					t.Errorf("%s: %v, want UnschedulableAndUnresolvable containing %q", node, got, want)
				}
			}
			// The status goes Installed on n2, and is deleted for n1: n2 passes, n1 is refused.
			onNodeStatus(e.pl.st, nodeStatus("web-n2", "SeccompProfile-web", "n2", "Installed", true))
			e.pl.st.deleteNodeStatus("web-n1")
			if got := e.pl.Filter(context.Background(), cs, pod, nodeInfo("n2")); !got.IsSuccess() {
				t.Errorf("n2 after install: %v", got)
			}
			if got := e.pl.Filter(context.Background(), cs, pod, nodeInfo("n1")); got.IsSuccess() {
				t.Error("n1 passes after its status went")
			}
		})
	}
}

// A profile naming a syscall Linux does not have still scores (the name counts), and the
// record of a pod using it says so.
func TestUnknownSyscallNoted(t *testing.T) {
	e := newEnv(t, shapeCluster, nil, seccompProfile("", "typo", "", "read", "wrtie"))
	ps := e.pl.st.podSet(e.newPod("p", withPodProfile(e.path("", "typo"))))
	if ps.size != 2 || !strings.Contains(strings.Join(ps.notes(), ";"), "names syscalls Linux does not have (wrtie)") {
		t.Fatalf("size %d notes %v: want 2 and a note naming wrtie", ps.size, ps.notes())
	}
	if got := profiles.UnknownSyscalls([]string{"read", "_llseek", "io_uring_setup", "wrtie"}); len(got) != 1 || got[0] != "wrtie" {
		t.Fatalf("unknown %v, want [wrtie]", got)
	}
}
