package sysched

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/profiles"
)

// spoVersion is the newest Security Profiles Operator the Go module proxy serves; its own CRD
// manifests (deploy/base-crds/crds) are what the test installs, not Berth's copy.
const spoVersion = "v0.10.0"

// spoCRDs downloads SPO's module through the Go module proxy and reads its CRDs.
func spoCRDs(t *testing.T, files ...string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := framework.ModuleCRDs(t.TempDir(), "sigs.k8s.io/security-profiles-operator", spoVersion, "deploy/base-crds/crds", files...)
	if err != nil {
		t.Fatal(err)
	}
	return crds
}

// Issue 22 on SPO's own CRDs: four profiles of our own (two "web" sharing 30 of 32 syscalls,
// two "db" sharing 34 of 36), a RuntimeDefault DaemonSet and an unconfined one on every node,
// pods created one after another. Like profiles share nodes, never web beside db; and a node
// where SPO reports a profile not Installed is refused.
func TestSPOsOwnCRDsWithDaemonSets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	crds := spoCRDs(t, "seccompprofile.yaml", "profilebinding.yaml", "securityprofilenodestatus.yaml")
	c := framework.StartCluster(ctx, t, cluster.Config{WithoutBerthCRDs: true})
	if err := cluster.InstallCRDs(ctx, c.RESTConfig, crds...); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "sysched-spo"
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"sys-1", "sys-2", "sys-3"}
	for _, n := range nodes {
		if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n, CPU: "8", Memory: "32Gi", Labels: map[string]string{"sysched-spo": "yes"}}); err != nil {
			t.Fatal(err)
		}
	}
	waitSchedulable(ctx, t, c, nodes...)
	for i, name := range []string{"agent", "log-shipper"} {
		ds := daemonSet(ns, name, i == 0)
		if _, err := c.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := framework.WaitPods(ctx, c.Client, ns, "role=daemon", 2*len(nodes), 2*time.Minute, framework.Running); err != nil {
		t.Fatal(err)
	}

	rd, err := profiles.ContainerdDefault()
	if err != nil {
		t.Fatal(err)
	}
	real := rd.Syscalls // real names, so no profile is noted for unknown syscalls
	webCore, dbCore := real[0:30], real[40:74]
	sets := map[string][]string{
		"web-a":        append(append([]string{}, webCore...), real[30], real[31]),
		"web-b":        append(append([]string{}, webCore...), real[32], real[33]),
		"db-a":         append(append([]string{}, dbCore...), real[80], real[81]),
		"db-b":         append(append([]string{}, dbCore...), real[82], real[83]),
		"web-c":        append(append([]string{}, webCore...), real[34], real[35]),
		"all-syscalls": real,
	}
	for name, s := range sets {
		applySPO(ctx, t, dyn, map[string]any{"apiVersion": profiles.Group + "/v1beta1", "kind": "SeccompProfile",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": allow(s...)}}, "")
	}
	// SPO's per-node install states, in v0.10's shape: the four on every node; web-c
	// Installed on sys-1, Pending on sys-2, nothing for sys-3.
	spns := schema.GroupVersionResource{Group: profiles.Group, Version: "v1alpha1", Resource: "securityprofilenodestatuses"}
	status := func(profile, node, state string) {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": profiles.Group + "/v1alpha1", "kind": "SecurityProfileNodeStatus",
			"metadata": map[string]any{"name": profile + "-" + node, "labels": map[string]any{
				profiles.ProfileIDLabel: "SeccompProfile-" + profile, "spo.x-k8s.io/node-name": node,
				"spo.x-k8s.io/profile-kind": "SeccompProfile", "spo.x-k8s.io/profile-state": state}},
			"nodeName": node, "status": state}}
		if _, err := dyn.Resource(spns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"web-a", "web-b", "db-a", "db-b"} {
		for _, n := range nodes {
			status(p, n, "Installed")
		}
	}
	status("web-c", "sys-1", "Installed")
	status("web-c", "sys-2", "Pending")
	sched, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Config: schedulerConfig(schedulerName)})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := stack.SchedulerMetrics(ctx, c, sched.Port)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("like profiles co-locate beside DaemonSet pods", func(t *testing.T) {
		placed := map[string][]string{}
		for i, p := range []string{"web-a", "db-a", "web-b", "db-b", "web-a", "db-a", "web-b", "db-b"} {
			pod := createProfiledPod(ctx, t, c, ns, fmt.Sprintf("%s-%d", p, i), "operator/"+p+".json")
			waitBound(ctx, t, c, pod)
			got, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			placed[got.Spec.NodeName] = append(placed[got.Spec.NodeName], p)
		}
		for node, ps := range placed {
			web, db := false, false
			for _, p := range ps {
				web = web || strings.HasPrefix(p, "web")
				db = db || strings.HasPrefix(p, "db")
			}
			if web && db {
				t.Errorf("node %s holds web and db pods: %v (placement %v)", node, ps, placed)
			}
		}
		t.Logf("placement: %v", placed)
	})

	t.Run("a node where the profile is not installed is refused", func(t *testing.T) {
		pod := createProfiledPod(ctx, t, c, ns, "web-c-anywhere", "operator/web-c.json")
		waitBound(ctx, t, c, pod)
		if got, _ := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); got.Spec.NodeName != "sys-1" {
			t.Errorf("web-c placed on %s, want sys-1 (the only node where it is Installed)", got.Spec.NodeName)
		}
		spec := framework.PodSpec(schedulerName, "", "")
		spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: localhost("operator/web-c.json")}
		spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "sys-2"}
		pinned, err := c.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, "web-c-on-sys-2", map[string]string{"case": "web-c-on-sys-2"}, spec), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var msg string
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pinned.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
					msg = cond.Message
				}
			}
			return strings.Contains(msg, "is Pending on node sys-2, not Installed"), nil
		})
		if err != nil {
			t.Fatalf("pinned pod: want PodScheduled=False naming web-c Pending on sys-2, got %q", msg)
		}
		// SPO reports web-c Installed on sys-2: SySched hands the pinned pod back to the queue
		// then (its counter says so), rather than leaving it for the queue's periodic flush.
		st, err := dyn.Resource(spns).Get(ctx, "web-c-sys-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st.Object["status"] = "Installed"
		st.SetLabels(map[string]string{profiles.ProfileIDLabel: "SeccompProfile-web-c", "spo.x-k8s.io/node-name": "sys-2",
			"spo.x-k8s.io/profile-kind": "SeccompProfile", "spo.x-k8s.io/profile-state": "Installed"})
		if _, err := dyn.Resource(spns).Update(ctx, st, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitBound(ctx, t, c, pinned)
		page := metrics()
		if n, ok := framework.MetricValue(page, "berth_sysched_pods_retried_total"); !ok || n < 1 {
			t.Fatalf("bound, but SySched did not hand the pod back (berth_sysched_pods_retried_total %v, found %v)", n, ok)
		}
	})
}

func daemonSet(ns, name string, runtimeDefault bool) *appsv1.DaemonSet {
	labels := map[string]string{"role": "daemon", "daemon": name}
	spec := framework.PodSpec("", "10m", "16Mi")
	spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if runtimeDefault {
		spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
}
