package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

func podConfigObj(deleting bool, finalizers []string, entries ...map[string]any) *unstructured.Unstructured {
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "berth.dev/v1alpha1", "kind": "PodConfig",
		"metadata": map[string]any{"namespace": "cnf", "name": "a", "resourceVersion": "7"},
		// A spec of whatever shape: the command must not read it.
		"spec": map[string]any{"networkAttachments": []any{map[string]any{"name": "net1", "network": "lab", "future": true}}},
	}}
	pc.SetFinalizers(finalizers)
	if deleting {
		now := metav1.Now()
		pc.SetDeletionTimestamp(&now)
	}
	var pods []any
	for _, e := range entries {
		pods = append(pods, e)
	}
	if pods != nil {
		_ = unstructured.SetNestedSlice(pc.Object, pods, "status", "pods")
	}
	return pc
}

func pool(name string, allocs ...map[string]any) *unstructured.Unstructured {
	var list []any
	for _, a := range allocs {
		list = append(list, a)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "berth.dev/v1alpha1", "kind": "IPAllocation",
		"metadata": map[string]any{"name": name, "resourceVersion": "3"},
		"spec":     map[string]any{"allocations": list},
		"status":   map[string]any{"used": int64(len(list))},
	}}
}

func alloc(addr, ns, pc, pod string) map[string]any {
	return map[string]any{"address": addr, "podNamespace": ns, "podConfig": pc, "podName": pod, "podUID": "uid-" + pod, "attachment": "net1"}
}

func runningPod(name, uid string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "cnf", Name: name, UID: types.UID(uid)},
		Spec: corev1.PodSpec{NodeName: "berth-real"}, Status: corev1.PodStatus{Phase: phase}}
}

// release frees the PodConfig's addresses and drops its finalizer only when it is being deleted
// and none of its pods still runs; otherwise it says why and changes nothing.
func TestReleasePodConfig(t *testing.T) {
	entries := []map[string]any{{"pod": "p1", "podUID": "uid-p1", "attachment": "net1", "node": "berth-real"},
		{"pod": "p1", "podUID": "uid-p1", "attachment": "net2", "node": "berth-real"}, {"pod": "p2", "attachment": "net1"}}
	pools := func() []runtime.Object {
		return []runtime.Object{
			pool("lab", alloc("192.168.50.2", "cnf", "a", "p1"), alloc("192.168.50.3", "cnf", "b", "q"), alloc("192.168.50.4", "other", "a", "r")),
			pool("lab2", alloc("fd00::2", "cnf", "a", "p1")),
			pool("empty"),
		}
	}
	for _, tc := range []struct {
		name          string
		pc            *unstructured.Unstructured
		pods          []runtime.Object
		wantErr       string
		wantMsg       string
		wantReleased  bool
		wantFinalizer []string // left on the PodConfig
	}{{
		name: "not found", wantErr: "PodConfig cnf/a not found",
	}, {
		name: "no finalizer: nothing to do", pc: podConfigObj(true, nil, entries...),
		wantMsg: "holds no berth.dev/podconfig finalizer: nothing to release",
	}, {
		name: "not being deleted: refused", pc: podConfigObj(false, []string{podConfigFinalizer}, entries...),
		wantErr: "PodConfig cnf/a is not being deleted: delete it first", wantFinalizer: []string{podConfigFinalizer},
	}, {
		name: "a pod still running: refused, naming it", pc: podConfigObj(true, []string{podConfigFinalizer}, entries...),
		pods:    []runtime.Object{runningPod("p1", "uid-p1", corev1.PodRunning), runningPod("p2", "any", corev1.PodPending)},
		wantErr: "its pods still run and hold its links: cnf/p1 (on berth-real, Running), cnf/p2 (on berth-real, Pending)", wantFinalizer: []string{podConfigFinalizer},
	}, {
		name:         "pods gone: released, other finalizers and other PodConfigs' addresses kept",
		pc:           podConfigObj(true, []string{"example.com/keep", podConfigFinalizer}, entries...),
		wantMsg:      "PodConfig cnf/a released: no pod of it runs, freed 192.168.50.2 in lab, fd00::2 in lab2, finalizer berth.dev/podconfig removed",
		wantReleased: true, wantFinalizer: []string{"example.com/keep"},
	}, {
		name:         "another pod under the same name, and a finished pod: released",
		pc:           podConfigObj(true, []string{podConfigFinalizer}, entries...),
		pods:         []runtime.Object{runningPod("p1", "uid-new", corev1.PodRunning), runningPod("p2", "x", corev1.PodSucceeded)},
		wantReleased: true, wantMsg: "released",
	}, {
		name: "no status at all (the operator never ran): released", pc: podConfigObj(true, []string{podConfigFinalizer}),
		pods: []runtime.Object{runningPod("unrelated", "u", corev1.PodRunning)}, wantReleased: true, wantMsg: "released",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objs := pools()
			if tc.pc != nil {
				objs = append(objs, tc.pc)
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{podConfigGVR: "PodConfigList", ipAllocationGVR: "IPAllocationList"}, objs...)
			cs := kubefake.NewClientset(tc.pods...)
			msg, err := ReleasePodConfig(context.Background(), dyn, cs, "cnf", "a")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("release: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("release: %v, want an error containing %q", err, tc.wantErr)
			case tc.wantErr == "" && !strings.Contains(msg, tc.wantMsg):
				t.Errorf("message %q, want it to contain %q", msg, tc.wantMsg)
			}
			var rpe *RunningPodsError
			if strings.Contains(tc.wantErr, "still run") && !errors.As(err, &rpe) {
				t.Errorf("error %T, want a *RunningPodsError", err)
			}
			if tc.pc != nil {
				got, err := dyn.Resource(podConfigGVR).Namespace("cnf").Get(context.Background(), "a", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := tc.wantFinalizer
				if want == nil && !tc.wantReleased {
					want = tc.pc.GetFinalizers()
				}
				if fin := got.GetFinalizers(); !slices.Equal(fin, want) {
					t.Errorf("finalizers %v, want %v", fin, want)
				}
			}
			// Addresses: this PodConfig's go only when released; every other one stays.
			left := map[string][]string{}
			for _, name := range []string{"lab", "lab2", "empty"} {
				p, err := dyn.Resource(ipAllocationGVR).Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				allocs, _, _ := unstructured.NestedSlice(p.Object, "spec", "allocations")
				for _, a := range allocs {
					left[name] = append(left[name], a.(map[string]any)["address"].(string))
				}
				used, _, _ := unstructured.NestedInt64(p.Object, "status", "used")
				if int(used) != len(allocs) {
					t.Errorf("IPAllocation %s: status.used %d with %d allocations", name, used, len(allocs))
				}
			}
			wantLeft := map[string][]string{"lab": {"192.168.50.2", "192.168.50.3", "192.168.50.4"}, "lab2": {"fd00::2"}}
			if tc.wantReleased {
				wantLeft = map[string][]string{"lab": {"192.168.50.3", "192.168.50.4"}}
			}
			for _, name := range []string{"lab", "lab2", "empty"} {
				if !slices.Equal(left[name], wantLeft[name]) {
					t.Errorf("IPAllocation %s holds %v, want %v", name, left[name], wantLeft[name])
				}
			}
		})
	}
}

// Bad arguments are refused before any cluster is asked, naming what is wrong.
func TestPodConfigMainArgs(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"release"}, 2, "Usage: kubectl berth podconfig release NAMESPACE/NAME"},
		{[]string{"delete", "cnf/a"}, 2, "Usage: kubectl berth podconfig release NAMESPACE/NAME"},
		{[]string{"release", "a"}, 2, `NAMESPACE/NAME: "a" is not a PodConfig's namespace/name`},
		{[]string{"release", "cnf/"}, 2, `NAMESPACE/NAME: "cnf/" is not`},
		{[]string{"release", "cnf/a/b"}, 2, `NAMESPACE/NAME: "cnf/a/b" is not`},
		{[]string{"release", "cnf/a", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"--help"}, 0, "When the operator is gone"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb strings.Builder
			code := podConfigMain(context.Background(), tc.args, &out, &errb)
			if code != tc.wantCode || !strings.Contains(errb.String(), tc.wantErr) {
				t.Errorf("code %d, stderr %q; want %d and %q", code, errb.String(), tc.wantCode, tc.wantErr)
			}
		})
	}
}
