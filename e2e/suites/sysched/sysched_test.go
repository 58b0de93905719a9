// Package sysched runs SySched end to end: the real control plane with KWOK nodes, the SPO
// CRDs Berth ships, and the real berth-scheduler binary as a process with SySched enabled.
package sysched

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	spocrds "github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/crds"
)

const (
	schedulerName = "berth-scheduler"
	bindingNS     = "sysched-binding"
)

var (
	profileFiles = []string{"full.profile.yaml", "nginx.profile.yaml", "redis.profile.yaml", "memcached.profile.yaml"}
	bindingFiles = []string{"nginx.binding.yaml", "redis.binding.yaml", "memcached.binding.yaml"}
)

// TestClusterScopedProfiles is the seed's demo with SPO's current (cluster-scoped) API, followed
// by the bad-input cases on the same cluster and scheduler.
func TestClusterScopedProfiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{})
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range profileFiles {
		for _, m := range loadDocs(t, f) {
			applySPO(ctx, t, dyn, m, "")
		}
	}
	for _, f := range bindingFiles {
		for _, m := range loadDocs(t, f) {
			applySPO(ctx, t, dyn, m, "")
		}
	}
	// The binding case's namespace and binding exist before the scheduler starts, so its
	// informers have them when it places the pods. No spo.x-k8s.io/enable-binding label and
	// no webhook: nothing rewrites the pods.
	if err := framework.EnsureNamespace(ctx, c.Client, bindingNS); err != nil {
		t.Fatal(err)
	}
	for _, m := range loadDocs(t, "memcached.binding.yaml") {
		applySPO(ctx, t, dyn, m, bindingNS)
	}
	// SPO v1's podSelector: this binding binds only pods labelled tier=cache.
	applySPO(ctx, t, dyn, map[string]any{"apiVersion": "security-profiles-operator.x-k8s.io/v1", "kind": "ProfileBinding",
		"metadata": map[string]any{"name": "memcached-selected"},
		"spec": map[string]any{"image": "memcached:selected", "podSelector": map[string]any{"matchLabels": map[string]any{"tier": "cache"}},
			"profileRef": map[string]any{"kind": "SeccompProfile", "name": "memcached-seccomp"}}}, bindingNS)
	sched, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Config: schedulerConfig(schedulerName)})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("seed 000: nginx pods share a node, redis and memcached the other", func(t *testing.T) {
		// Only these two nodes exist while the seed's pods are placed.
		addSeedNodes(ctx, t, c)
		checkSeedPlacement(t, seedSequence(ctx, t, c, "default"))
	})

	t.Run("ProfileBinding is honoured without SPO's webhook", func(t *testing.T) {
		// Each case gets two fresh nodes: one runs an nginx pod (127 syscalls), the other a
		// memcached pod (93). A pod counted as the full profile prefers the nginx node (fewer
		// syscalls it adds there), a pod bound to memcached-seccomp prefers the memcached node,
		// so the control case proves the outcome depends on the binding being applied.
		const ns = bindingNS
		cases := []struct {
			name, image string
			tier        string
			wantAnchor  string
		}{
			{"bound", "memcached:1.6", "", "memcached"},
			{"control", "memcached:unbound", "", "nginx"},
			{"selected", "memcached:selected", "cache", "memcached"},
			{"not-selected", "memcached:selected", "batch", "nginx"},
		}
		for _, tc := range cases {
			group := "binding-" + tc.name
			nodes := map[string]string{"nginx": group + "-nginx", "memcached": group + "-memcached"}
			for anchor, node := range nodes {
				if err := c.AddNodes(ctx, cluster.NodeSpec{Name: node, CPU: "4", Memory: "16Gi", Labels: map[string]string{"sysched-group": group}}); err != nil {
					t.Fatal(err)
				}
				spec := framework.PodSpec("", "", "")
				spec.NodeName = node // placed directly: SySched counts pods of every scheduler
				spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: localhost("operator/" + anchor + "-seccomp.json")}
				if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, group+"-anchor-"+anchor, map[string]string{"role": group + "-anchor"}, spec), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := framework.WaitPods(ctx, c.Client, ns, "role="+group+"-anchor", 2, time.Minute, framework.Running); err != nil {
				t.Fatal(err)
			}
			waitSchedulable(ctx, t, c, nodes["nginx"], nodes["memcached"])
			spec := framework.PodSpec(schedulerName, "", "")
			spec.Containers[0].Image = tc.image
			spec.NodeSelector = map[string]string{"sysched-group": group}
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, group+"-pod", map[string]string{"role": group + "-pod", "tier": tc.tier}, spec), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pods, err := framework.WaitPods(ctx, c.Client, ns, "role="+group+"-pod", 1, time.Minute, framework.Bound)
			if err != nil {
				t.Fatal(err)
			}
			if got := pods[0].Spec.NodeName; got != nodes[tc.wantAnchor] {
				t.Errorf("%s: image %s placed on %s, want %s (beside the %s pod)", tc.name, tc.image, got, nodes[tc.wantAnchor], tc.wantAnchor)
			}
			if pods[0].Spec.SecurityContext != nil && pods[0].Spec.SecurityContext.SeccompProfile != nil {
				t.Errorf("%s: the pod was rewritten (%v); the binding must be applied by the scheduler only", tc.name, pods[0].Spec.SecurityContext.SeccompProfile)
			}
		}
	})

	t.Run("a pod naming a missing profile is scheduled with an event naming it", func(t *testing.T) {
		const ns = "sysched-missing"
		if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
			t.Fatal(err)
		}
		pod := createProfiledPod(ctx, t, c, ns, "missing", "operator/no-such-profile.json")
		waitBound(ctx, t, c, pod)
		note, err := waitEvent(ctx, c, pod, "SeccompProfileNotFound", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(note, "no-such-profile") {
			t.Errorf("event note %q does not name the missing profile", note)
		}
	})

	t.Run("malformed and deleted profiles do not stop scheduling", func(t *testing.T) {
		const ns = "sysched-bad"
		if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
			t.Fatal(err)
		}
		// Objects the CRD schema admits but that make no sense: a baseProfileName cycle, a
		// whitespace-only syscall name, and a base that does not exist.
		bad := map[string]map[string]any{
			"loop-a":       {"baseProfileName": "loop-b", "syscalls": allow("read")},
			"loop-b":       {"baseProfileName": "loop-a", "syscalls": allow("write")},
			"blank-name":   {"syscalls": allow(" ", "read")},
			"missing-base": {"baseProfileName": "never-created", "syscalls": allow("read")},
			"doomed":       {"syscalls": allow("read", "write")},
		}
		for name, spec := range bad {
			spec["defaultAction"] = "SCMP_ACT_ERRNO"
			applySPO(ctx, t, dyn, map[string]any{
				"apiVersion": "security-profiles-operator.x-k8s.io/v1", "kind": "SeccompProfile",
				"metadata": map[string]any{"name": name}, "spec": spec,
			}, "")
		}
		waitLog(ctx, t, sched, "baseProfileName cycle")
		for _, name := range []string{"loop-a", "blank-name", "missing-base", "doomed"} {
			waitBound(ctx, t, c, createProfiledPod(ctx, t, c, ns, name, "operator/"+name+".json"))
		}
		gvr := (&unstructured.Unstructured{Object: map[string]any{"apiVersion": "security-profiles-operator.x-k8s.io/v1", "kind": "SeccompProfile"}})
		if err := dyn.Resource(gvrOf(gvr)).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The scheduler reports the profile its pods still use disappearing...
		waitLog(ctx, t, sched, "SeccompProfile deleted while pods still reference it")
		// ...and the next pod naming it is still placed, with the missing-profile event.
		after := createProfiledPod(ctx, t, c, ns, "doomed-after-delete", "operator/doomed.json")
		waitBound(ctx, t, c, after)
		if _, err := waitEvent(ctx, c, after, "SeccompProfileNotFound", time.Minute); err != nil {
			t.Error(err)
		}
		if exited, err := sched.Exited(); exited {
			t.Fatalf("berth-scheduler exited: %v\n%s", err, sched.Tail(30))
		}
	})
}

// TestNamespacedProfiles is the seed's demo against SPO's legacy API (namespaced
// SeccompProfile, SPO <= v0.8), installed by the test instead of the harness.
func TestNamespacedProfiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{WithoutBerthCRDs: true})
	ext, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	names, err := spocrds.InstallIfAbsent(ctx, ext, spocrds.NamespacedCRDs()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		waitEstablished(ctx, t, ext, name)
	}
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "seccompprofiles.security-profiles-operator.x-k8s.io", metav1.GetOptions{})
	if err != nil || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Fatalf("SeccompProfile CRD not namespaced: %v %v", err, crd.Spec.Scope)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	// The examples' legacy shape: the same objects with metadata.namespace set.
	for _, f := range append(append([]string{}, profileFiles...), bindingFiles...) {
		for _, m := range loadDocs(t, f) {
			applySPO(ctx, t, dyn, m, "default")
		}
	}
	if _, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Config: schedulerConfig(schedulerName)}); err != nil {
		t.Fatal(err)
	}
	addSeedNodes(ctx, t, c)
	checkSeedPlacement(t, seedSequence(ctx, t, c, "default"))
}

func allow(names ...string) []any {
	n := make([]any, len(names))
	for i, s := range names {
		n[i] = s
	}
	return []any{map[string]any{"action": "SCMP_ACT_ALLOW", "names": n}}
}

func createProfiledPod(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name, path string) *corev1.Pod {
	t.Helper()
	spec := framework.PodSpec(schedulerName, "", "")
	spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: localhost(path)}
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, name, map[string]string{"case": name}, spec), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func waitBound(ctx context.Context, t *testing.T, c *cluster.Cluster, pod *corev1.Pod) {
	t.Helper()
	if _, err := framework.WaitPods(ctx, c.Client, pod.Namespace, "case="+pod.Name, 1, time.Minute, framework.Bound); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits until the scheduler's log contains s.
func waitLog(ctx context.Context, t *testing.T, p *cluster.SchedulerProcess, s string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(p.LogPath)
		return err == nil && strings.Contains(string(b), s), nil
	})
	if err != nil {
		t.Fatalf("berth-scheduler never logged %q:\n%s", s, p.Tail(30))
	}
}

func waitEstablished(ctx context.Context, t *testing.T, ext apiextensionsclient.Interface, name string) {
	t.Helper()
	if err := cluster.WaitCRDEstablished(ctx, ext, name, time.Minute); err != nil {
		t.Fatal(err)
	}
}
