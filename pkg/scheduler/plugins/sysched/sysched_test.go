package sysched

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/profiles"
)

// upstreamProfiles rebuilds the shape of scheduler-plugins' unit-test profiles: z and x share
// 90 names and differ in one (fchmod vs dup3); full is x plus 10 more.
func upstreamProfiles(ns string) (z, x, full *unstructured.Unstructured) {
	var common []string
	for i := 0; i < 90; i++ {
		common = append(common, fmt.Sprintf("sys_%02d", i))
	}
	z = seccompProfile(ns, "z-seccomp", "", append(append([]string{}, common...), "fchmod")...)
	xs := append(append([]string{}, common...), "dup3")
	x = seccompProfile(ns, "x-seccomp", "", xs...)
	full = seccompProfile(ns, "full-seccomp", "", append(xs, "pivot_root", "_sysctl", "adjtimex", "sync", "acct",
		"settimeofday", "statx", "pkey_free", "pkey_alloc", "pkey_mprotect")...)
	return
}

func TestUpstreamVectors(t *testing.T) {
	args, err := ParseArgs(&Args{DefaultProfileNamespace: "default", DefaultProfileName: "full-seccomp"})
	if err != nil {
		t.Fatal(err)
	}
	z, x, full := upstreamProfiles("default")
	e := newEnv(t, shapeNamespaced, args, z, x, full)
	zPath, xPath := e.path("default", "z-seccomp"), e.path("default", "x-seccomp")

	t.Run("path parsing", func(t *testing.T) {
		got := profiles.KeysForPath("localhost/operator/default/httpd-seccomp.json")
		if len(got) == 0 || got[0] != (profiles.Key{Namespace: "default", Name: "httpd-seccomp"}) {
			t.Fatalf("KeysForPath = %v", got)
		}
	})

	sources := []struct {
		name string
		pod  *v1.Pod
		want int
	}{
		{"annotation", e.newPod("a", func(p *v1.Pod) {
			p.Annotations = map[string]string{annotationPodSeccomp: "localhost/" + zPath}
		}), 91},
		{"pod securityContext", e.newPod("b", withPodProfile(zPath)), 91},
		{"container securityContext", e.newPod("c", func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: localhost(zPath)}
		}), 91},
		{"no profile uses the full profile", e.newPod("d", nil), 101},
	}
	for _, tc := range sources {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.setSize(tc.pod); got != tc.want {
				t.Fatalf("set size = %d, want %d", got, tc.want)
			}
		})
	}

	zPod := e.newPod("z", withPodProfile(zPath))
	if st := e.pl.Reserve(context.Background(), nil, zPod, "test"); !st.IsSuccess() {
		t.Fatal(st)
	}
	if got := e.nodeUnion("test"); got != 91 {
		t.Fatalf("host syscalls after z = %d, want 91", got)
	}
	raw, _, _ := e.scoreAll(e.newPod("x", withPodProfile(xPath)), []string{"test"})
	if raw[0] != 2 {
		t.Errorf("incoming x on z node: raw %d, want 2", raw[0])
	}
	raw, _, _ = e.scoreAll(e.newPod("z2", withPodProfile(zPath)), []string{"test"})
	if raw[0] != 0 {
		t.Errorf("incoming z on z node: raw %d, want 0", raw[0])
	}

	xPod := e.newPod("x", withPodProfile(xPath))
	e.pl.Reserve(context.Background(), nil, xPod, "test")
	e.pl.Reserve(context.Background(), nil, e.newPod("f", nil), "test1")
	if got := e.nodeUnion("test"); got != 92 {
		t.Fatalf("host syscalls z+x = %d, want 92", got)
	}
	e.pl.Unreserve(context.Background(), nil, zPod, "test")
	if got, n := e.nodeUnion("test"), e.nodePods("test"); got != 91 || n != 1 {
		t.Fatalf("after removing z: union %d pods %d, want 91 and 1", got, n)
	}

	for _, tc := range []struct{ in, want []int64 }{
		{[]int64{100, 200}, []int64{50, 0}},
		{[]int64{0, 200}, []int64{100, 0}},
		{[]int64{0, 0}, []int64{100, 100}},
	} {
		list := fwk.NodeScoreList{{Name: "a", Score: tc.in[0]}, {Name: "b", Score: tc.in[1]}}
		e.pl.NormalizeScore(context.Background(), nil, nil, list)
		if list[0].Score != tc.want[0] || list[1].Score != tc.want[1] {
			t.Errorf("NormalizeScore(%v) = %v, want %v", tc.in, list, tc.want)
		}
	}
}

// TestKEPExample replays KEP-399's three-pod example: S1={1,2,3,5}, S2={4,7,8}, S3={1,3,5,9}.
func TestKEPExample(t *testing.T) {
	sets := map[string][]string{
		"p1": {"1", "2", "3", "5"}, "p2": {"4", "7", "8"}, "p3": {"1", "3", "5", "9"},
	}
	var objs []*unstructured.Unstructured
	for n, s := range sets {
		objs = append(objs, seccompProfile("default", n, "", s...))
	}
	e := newEnv(t, shapeCluster, nil, objs...)
	nodes := []string{"node1", "node2"}
	placed := map[string][]string{}
	steps := []struct {
		pod      string
		wantRaw  []int64
		wantNorm []int64
	}{
		{"p1", []int64{0, 0}, []int64{100, 100}},
		{"p2", []int64{7, 0}, []int64{0, 100}},
		{"p3", []int64{2, 7}, []int64{72, 0}},
	}
	for _, s := range steps {
		pod := e.newPod(s.pod, withPodProfile(e.path("default", s.pod)))
		raw, norm, _ := e.scoreAll(pod, nodes)
		if fmt.Sprint(raw) != fmt.Sprint(s.wantRaw) || fmt.Sprint(norm) != fmt.Sprint(s.wantNorm) {
			t.Fatalf("%s: raw %v norm %v, want %v %v", s.pod, raw, norm, s.wantRaw, s.wantNorm)
		}
		n := e.schedule(pod, nodes)
		placed[n] = append(placed[n], s.pod)
	}
	// Cluster ExS recomputed from plain string sets, independently of the plugin's bitsets.
	total := 0
	for _, pods := range placed {
		union := map[string]bool{}
		for _, p := range pods {
			for _, s := range sets[p] {
				union[s] = true
			}
		}
		for _, p := range pods {
			total += len(union) - len(sets[p])
		}
	}
	if total != 2 {
		t.Fatalf("final cluster ExS = %d (placement %v), want 2", total, placed)
	}
}

// TestSeedSequence schedules the seed's Deployments (nginx1, redis1, nginx2, memcached1) on two
// nodes using the example profiles and bindings shipped in examples/sysched.
func TestSeedSequence(t *testing.T) {
	var objs []*unstructured.Unstructured
	for _, f := range []string{"full.profile.yaml", "nginx.profile.yaml", "redis.profile.yaml", "memcached.profile.yaml",
		"nginx.binding.yaml", "redis.binding.yaml", "memcached.binding.yaml"} {
		for _, m := range loadExample(t, f) {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	for _, sh := range []shape{shapeCluster, shapeNamespaced} {
		t.Run(fmt.Sprintf("%s namespaced=%v", sh.version, sh.namespaced), func(t *testing.T) {
			var own []*unstructured.Unstructured
			for _, o := range objs {
				c := o.DeepCopy()
				if c.GetKind() == "SeccompProfile" && sh.namespaced {
					c.SetNamespace("default")
				}
				own = append(own, c)
			}
			e := newEnv(t, sh, nil, own...)
			nodes := []string{"mynode-1", "mynode-2"}
			placed := map[string]string{}
			for _, f := range []string{"nginx1.yaml", "redis1.yaml", "nginx2.yaml", "memcached1.yaml"} {
				for _, m := range loadExample(t, f) {
					if m["kind"] != "Deployment" {
						continue
					}
					raw, _ := yaml.Marshal(m)
					var d appsv1.Deployment
					if err := yaml.Unmarshal(raw, &d); err != nil {
						t.Fatal(err)
					}
					if d.Spec.Template.Spec.SchedulerName != "berth-scheduler" {
						t.Fatalf("%s: schedulerName %q", f, d.Spec.Template.Spec.SchedulerName)
					}
					pod := e.newPod(d.Name, func(p *v1.Pod) { p.Spec = d.Spec.Template.Spec })
					if ps := e.pl.st.podSet(pod); ps.usesFull {
						t.Fatalf("%s: binding not applied, pod counted as full (missing %v)", d.Name, ps.missing)
					}
					placed[d.Name] = e.schedule(pod, nodes)
				}
			}
			if placed["nginx1"] != placed["nginx2"] || placed["redis1"] != placed["memcached1"] || placed["nginx1"] == placed["redis1"] {
				t.Fatalf("placement %v: want nginx1+nginx2 together and redis1+memcached1 together", placed)
			}
		})
	}
}

func TestBaseProfiles(t *testing.T) {
	for _, sh := range []shape{shapeNamespaced, shapeCluster} {
		t.Run(sh.version, func(t *testing.T) {
			e := newEnv(t, sh, nil,
				seccompProfile("default", "all-syscalls", "", "a", "b", "c", "d", "e", "f"),
				seccompProfile("default", "runc-base", "", "a", "b"),
				seccompProfile("default", "app", "runc-base", "c"),
				seccompProfile("default", "oci-child", "oci://ghcr.io/x/base:1", "c"),
				seccompProfile("default", "orphan", "does-not-exist", "c"),
			)
			pod := func(name string) *v1.Pod { return e.newPod(name, withPodProfile(e.path("default", name))) }
			if got := e.setSize(pod("app")); got != 3 {
				t.Fatalf("app with base: %d syscalls, want 3", got)
			}
			// Unknown base content (OCI artifact, missing object) must not shrink exposure.
			for _, n := range []string{"oci-child", "orphan"} {
				if got := e.setSize(pod(n)); got != 6 {
					t.Errorf("%s: %d syscalls, want full 6", n, got)
				}
			}
			// A change to the base alone must reach pods already placed with the child.
			e.pl.Reserve(context.Background(), nil, pod("app"), "n1")
			e.updateProfile(seccompProfile("default", "runc-base", "", "a", "b", "d", "e"))
			e.eventually("node union to include the new base syscalls", func() bool { return e.nodeUnion("n1") == 5 })
			// Creating the missing base heals the orphan.
			e.createProfile(seccompProfile("default", "does-not-exist", ""))
			e.eventually("orphan to resolve", func() bool { return e.setSize(pod("orphan")) == 1 })
		})
	}
}

func TestBaseCycleAndDepth(t *testing.T) {
	objs := []*unstructured.Unstructured{
		seccompProfile("default", "all-syscalls", "", "a", "b", "c", "d", "x"),
		seccompProfile("default", "loop-a", "loop-b", "a"),
		seccompProfile("default", "loop-b", "loop-a", "b"),
		seccompProfile("default", "self", "self", "c"),
	}
	// A chain longer than maxBaseDepth: deep-0 → deep-1 → … each adding one syscall.
	for i := 0; i <= maxBaseDepth+1; i++ {
		objs = append(objs, seccompProfile("default", fmt.Sprintf("deep-%d", i), fmt.Sprintf("deep-%d", i+1), fmt.Sprintf("d%d", i)))
	}
	e := newEnv(t, shapeCluster, nil, objs...)
	pod := func(name string) *v1.Pod { return e.newPod(name, withPodProfile(e.path("default", name))) }
	if got := e.setSize(pod("loop-a")); got != 2 {
		t.Errorf("loop-a: %d, want union of the cycle (2)", got)
	}
	if got := e.setSize(pod("self")); got != 1 {
		t.Errorf("self-base: %d, want 1", got)
	}
	// Too deep is unknown content, so the pod counts as full, which now includes all d* names.
	ps := e.pl.st.podSet(pod("deep-0"))
	if !ps.usesFull {
		t.Errorf("over-deep chain not treated as full: size %d", ps.size)
	}
	// A deleted cycle member must not leave stale data or panic.
	e.deleteProfile("default", "loop-b")
	e.eventually("loop-a to become full (base missing)", func() bool { return e.pl.st.podSet(pod("loop-a")).usesFull })
}

func TestMissingProfileEvent(t *testing.T) {
	e := newEnv(t, shapeNamespaced, nil,
		seccompProfile("default", "all-syscalls", "", "a", "b", "c"),
		seccompProfile("default", "small", "", "a"))
	pod := e.newPod("p", func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side", Image: "side"})
		p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: localhost(e.path("default", "nope"))}
		p.Spec.Containers[1].SecurityContext = &v1.SecurityContext{SeccompProfile: localhost(e.path("default", "small"))}
	})
	e.scoreAll(pod, []string{"n1"})
	select {
	case ev := <-e.recorder.Events:
		if !strings.Contains(ev, EventReasonProfileNotFound) || !strings.Contains(ev, "operator/default/nope.json") {
			t.Fatalf("event %q does not name the missing profile", ev)
		}
	default:
		t.Fatal("no event emitted for missing profile")
	}
	if got := e.setSize(pod); got != 3 {
		t.Fatalf("pod with missing profile: %d syscalls, want full 3", got)
	}
	// Creating it later recomputes pods already counted on nodes.
	e.pl.Reserve(context.Background(), nil, pod, "n1")
	e.createProfile(seccompProfile("default", "nope", "", "b"))
	e.eventually("node to shrink once the profile exists", func() bool { return e.nodeUnion("n1") == 2 })
	// Pods with resolvable profiles emit nothing.
	e.scoreAll(e.newPod("ok", withPodProfile(e.path("default", "small"))), []string{"n1"})
	select {
	case ev := <-e.recorder.Events:
		t.Fatalf("unexpected event %q", ev)
	default:
	}
}

// TestAPIShapes checks both SPO scopes and lookup through status.localhostProfile, which is the
// only way to find profiles when the kubelet directory is not the default.
func TestAPIShapes(t *testing.T) {
	for _, sh := range []shape{shapeNamespaced, shapeCluster, {version: "v1beta1", namespaced: false}} {
		t.Run(fmt.Sprintf("%s/namespaced=%v", sh.version, sh.namespaced), func(t *testing.T) {
			custom := seccompProfile("team", "custom", "", "a", "b")
			unstructured.SetNestedField(custom.Object, "custom-root/whatever.json", "status", "localhostProfile")
			e := newEnv(t, sh, nil,
				seccompProfile("team", "all-syscalls", "", "a", "b", "c", "d"),
				seccompProfile("team", "web", "", "a"),
				custom)
			if got := e.setSize(e.newPod("w", withPodProfile(e.path("team", "web")))); got != 1 {
				t.Errorf("path %s: %d, want 1", e.path("team", "web"), got)
			}
			if got := e.setSize(e.newPod("c", withPodProfile("custom-root/whatever.json"))); got != 2 {
				t.Errorf("status.localhostProfile lookup: %d, want 2", got)
			}
		})
	}
}

func TestPodSources(t *testing.T) {
	e := newEnv(t, shapeCluster, nil,
		seccompProfile("", "all-syscalls", "", "a", "b", "c", "d", "e", "f", "g"),
		seccompProfile("", "p-a", "", "a"), seccompProfile("", "p-b", "", "b"),
		seccompProfile("", "p-c", "", "c"), seccompProfile("", "p-d", "", "d"))
	path := func(n string) string { return e.path("", n) }
	ctrSC := func(p string) *v1.SecurityContext { return &v1.SecurityContext{SeccompProfile: localhost(p)} }
	cases := []struct {
		name     string
		mutate   func(*v1.Pod)
		want     int
		wantFull bool
	}{
		{"init and ephemeral containers count", func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = ctrSC(path("p-a"))
			p.Spec.InitContainers = []v1.Container{{Name: "i", SecurityContext: ctrSC(path("p-b"))}}
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", SecurityContext: ctrSC(path("p-c"))}}}
		}, 3, false},
		{"all legacy annotations are read", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d"})
			p.Annotations = map[string]string{
				annotationContainerSeccomp + "c": "localhost/" + path("p-a"),
				annotationContainerSeccomp + "d": "localhost/" + path("p-b"),
				annotationPodSeccomp:             "localhost/" + path("p-c"),
			}
		}, 3, false},
		{"pod level plus container override union", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: localhost(path("p-a"))}
			p.Spec.Containers[0].SecurityContext = ctrSC(path("p-b"))
		}, 2, false},
		{"container without profile next to a confined one is unconfined", func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = ctrSC(path("p-a"))
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side"})
		}, 7, true},
		{"runtime default counts as containerd's default profile", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
		}, containerdDefaultSize(t), false},
		{"unconfined annotation counts as full", func(p *v1.Pod) {
			p.Annotations = map[string]string{annotationPodSeccomp: "unconfined"}
		}, 7, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := e.newPod("p", tc.mutate)
			first := e.pl.st.podSet(pod)
			if first.size != tc.want || first.usesFull != tc.wantFull {
				t.Fatalf("size %d full %v, want %d %v (missing %v)", first.size, first.usesFull, tc.want, tc.wantFull, first.missing)
			}
			// Map iteration order must not leak into the result.
			for i := 0; i < 20; i++ {
				if again := e.pl.st.podSet(pod); fmt.Sprint(again.refs) != fmt.Sprint(first.refs) {
					t.Fatalf("non-deterministic refs: %v vs %v", again.refs, first.refs)
				}
			}
		})
	}
}

func TestBindings(t *testing.T) {
	e := newEnv(t, shapeCluster, nil,
		seccompProfile("", "all-syscalls", "", "a", "b", "c", "d", "e"),
		seccompProfile("", "web", "", "a"), seccompProfile("", "dflt", "", "b", "c"),
		binding("default", "web", "nginx:1.16", "web"))
	img := func(images ...string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Containers = nil
			for i, im := range images {
				p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprint("c", i), Image: im})
			}
		}
	}
	if got := e.setSize(e.newPod("a", img("nginx:1.16"))); got != 1 {
		t.Fatalf("image binding: %d, want 1", got)
	}
	// Exact string match, as SPO's webhook does: a different tag is not bound.
	if got := e.setSize(e.newPod("b", img("nginx:1.17"))); got != 5 {
		t.Fatalf("unbound tag: %d, want full 5", got)
	}
	// A binding overrides an explicit Unconfined container, as the webhook does.
	pod := e.newPod("c", img("nginx:1.16"))
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}
	if got := e.setSize(pod); got != 1 {
		t.Fatalf("binding over Unconfined: %d, want 1", got)
	}
	// "*" applies at pod level only when no container binding matched.
	star := binding("default", "star", "*", "dflt")
	if _, err := e.dyn.Resource(e.pbGVR).Namespace("default").Create(context.Background(), star, metaCreate); err != nil {
		t.Fatal(err)
	}
	placed := e.newPod("d", img("redis"))
	e.pl.Reserve(context.Background(), nil, placed, "n1")
	e.eventually("wildcard binding to apply to an already placed pod", func() bool { return e.nodeUnion("n1") == 2 })
	if got := e.setSize(e.newPod("e", img("nginx:1.16", "redis"))); got != 5 {
		t.Fatalf("container match suppresses wildcard, redis unconfined: %d, want 5", got)
	}
	// Other namespaces are untouched.
	other := e.newPod("f", img("nginx:1.16"))
	other.Namespace = "elsewhere"
	if got := e.setSize(other); got != 5 {
		t.Fatalf("binding leaked to another namespace: %d", got)
	}
}

// TestBackToBack covers the upstream bug where a pod just placed was invisible to the next one.
func TestBackToBack(t *testing.T) {
	e := newEnv(t, shapeCluster, nil,
		seccompProfile("", "all-syscalls", "", "a", "b", "c", "d"),
		seccompProfile("", "ab", "", "a", "b"), seccompProfile("", "cd", "", "c", "d"))
	nodes := []string{"n1", "n2"}
	p1 := e.newPod("p1", withPodProfile(e.path("", "ab")))
	p2 := e.newPod("p2", withPodProfile(e.path("", "cd")))
	if a, b := e.schedule(p1, nodes), e.schedule(p2, nodes); a == b {
		t.Fatalf("disjoint pods stacked on %s: the second did not see the first", a)
	}
	raw, _, _ := e.scoreAll(e.newPod("p3", withPodProfile(e.path("", "ab"))), nodes)
	if raw[0] != 0 || raw[1] == 0 {
		t.Fatalf("raw %v: want 0 on the ab node and >0 on the cd node", raw)
	}
	// Unreserve is idempotent and only drops unconfirmed placements on that node.
	e.pl.Unreserve(context.Background(), nil, p1, "n2")
	if e.nodePods("n1") != 1 {
		t.Fatal("Unreserve for the wrong node removed the pod")
	}
	e.pl.Unreserve(context.Background(), nil, p1, "n1")
	e.pl.Unreserve(context.Background(), nil, p1, "n1")
	if e.nodePods("n1") != 0 {
		t.Fatalf("after Unreserve: %d pods on n1", e.nodePods("n1"))
	}
}

func TestPodInformer(t *testing.T) {
	e := newEnv(t, shapeCluster, nil,
		seccompProfile("", "all-syscalls", "", "a", "b", "c", "d"), seccompProfile("", "ab", "", "a", "b"))
	ctx := context.Background()
	pod := e.newPod("bound", withPodProfile(e.path("", "ab")))
	pod.Spec.NodeName = "n1"
	// Reserve first, then the informer confirms: the pod must be counted once.
	e.pl.Reserve(ctx, nil, pod, "n1")
	if _, err := e.cs.CoreV1().Pods("default").Create(ctx, pod, metaCreatePod); err != nil {
		t.Fatal(err)
	}
	e.eventually("informer to confirm the assumed pod", func() bool {
		e.pl.st.mu.RLock()
		defer e.pl.st.mu.RUnlock()
		pe := e.pl.st.pods[pod.UID]
		return pe != nil && !pe.assumed
	})
	if n := e.nodePods("n1"); n != 1 {
		t.Fatalf("pod counted %d times", n)
	}
	// Unreserve after confirmation must not drop a bound pod.
	e.pl.Unreserve(ctx, nil, pod, "n1")
	if n := e.nodePods("n1"); n != 1 {
		t.Fatal("Unreserve removed an informer-confirmed pod")
	}
	other := e.newPod("other", nil)
	other.Spec.NodeName = "n1"
	if _, err := e.cs.CoreV1().Pods("default").Create(ctx, other, metaCreatePod); err != nil {
		t.Fatal(err)
	}
	e.eventually("pod bound by another scheduler to count", func() bool { return e.nodePods("n1") == 2 && e.nodeUnion("n1") == 4 })
	other.Status.Phase = v1.PodSucceeded
	if _, err := e.cs.CoreV1().Pods("default").UpdateStatus(ctx, other, metaUpdate); err != nil {
		t.Fatal(err)
	}
	e.eventually("terminated pod to be dropped", func() bool { return e.nodePods("n1") == 1 })
	if err := e.cs.CoreV1().Pods("default").Delete(ctx, pod.Name, metaDelete); err != nil {
		t.Fatal(err)
	}
	e.eventually("deleted pod to be dropped", func() bool { return e.nodePods("n1") == 0 })
}

func TestProfileDeletedWhileUsed(t *testing.T) {
	e := newEnv(t, shapeNamespaced, nil,
		seccompProfile("default", "all-syscalls", "", "a", "b", "c", "d"),
		seccompProfile("default", "ab", "", "a", "b"))
	pod := e.newPod("p", withPodProfile(e.path("default", "ab")))
	e.pl.Reserve(context.Background(), nil, pod, "n1")
	e.deleteProfile("default", "ab")
	e.eventually("pod to count as full after its profile is deleted", func() bool { return e.nodeUnion("n1") == 4 })
	// Deleting the full profile too falls back to every syscall name known: at least the four
	// the profiles named, and more if another path interned more meanwhile (the pod's unset
	// containers resolving RuntimeDefault, on the informer's schedule).
	e.deleteProfile("default", "all-syscalls")
	e.eventually("fallback full set", func() bool {
		e.pl.st.mu.RLock()
		known := len(e.pl.st.syscallNames)
		e.pl.st.mu.RUnlock()
		return known >= 4 && e.nodeUnion("n1") == known
	})
	raw, _, _ := e.scoreAll(e.newPod("q", nil), []string{"n1", "n2"})
	if raw[0] != 0 || raw[1] != 0 {
		t.Fatalf("two full pods should not add ExS: %v", raw)
	}
}

func TestMalformedProfileKeepsScheduling(t *testing.T) {
	bad := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": profiles.Group + "/v1", "kind": "SeccompProfile",
		"metadata": map[string]interface{}{"name": "bad"},
		"spec": map[string]interface{}{"baseProfileName": int64(7), "syscalls": []interface{}{
			"not-an-object",
			map[string]interface{}{"action": "SCMP_ACT_LOG", "names": []interface{}{"", int64(3), "ok_call", strings.Repeat("x", 500)}},
			map[string]interface{}{"action": "SCMP_ACT_ERRNO", "names": []interface{}{"denied"}},
		}},
	}}
	e := newEnv(t, shapeCluster, nil, seccompProfile("", "all-syscalls", "", "a", "b"), bad)
	ps := e.pl.st.podSet(e.newPod("p", withPodProfile(e.path("", "bad"))))
	if ps.size != 1 || ps.usesFull {
		t.Fatalf("bad profile: size %d full %v, want only ok_call", ps.size, ps.usesFull)
	}
	raw, _, _ := e.scoreAll(e.newPod("q", withPodProfile(e.path("", "bad"))), []string{"n1"})
	if raw[0] != 0 {
		t.Fatalf("empty node raw %d", raw[0])
	}
}

// TestConcurrentUse exists for -race: informer writes, Reserve/Unreserve and Score together.
func TestConcurrentUse(t *testing.T) {
	e := newEnv(t, shapeCluster, nil, seccompProfile("", "all-syscalls", "", "a", "b", "c"), seccompProfile("", "ab", "", "a", "b"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			e.pl.st.upsertProfile(&profiles.Profile{Key: profiles.Key{Name: "ab"}, Syscalls: []string{"a", fmt.Sprint("s", i)}})
		}
	}()
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		p := e.newPod(fmt.Sprint("p", i), withPodProfile(e.path("", "ab")))
		cs := framework.NewCycleState()
		e.pl.PreScore(ctx, cs, p, nil)
		e.pl.Score(ctx, cs, p, nodeInfo("n1"))
		e.pl.Reserve(ctx, cs, p, "n1")
		if i%2 == 0 {
			e.pl.Unreserve(ctx, cs, p, "n1")
		}
	}
	<-done
	if n := e.nodePods("n1"); n != 100 {
		t.Fatalf("pods on n1 = %d, want 100", n)
	}
	// After the final profile version every pod's set is {a, s49}: recompute must have kept
	// node counts consistent.
	e.pl.st.mu.RLock()
	defer e.pl.st.mu.RUnlock()
	ns := e.pl.st.nodes["n1"]
	if ns.h.count() != 2 || ns.sum != 200 {
		t.Fatalf("node union %d sum %d, want 2 and 200", ns.h.count(), ns.sum)
	}
}

var _ = types.UID("")
var _ runtime.Object = &Args{}

// Pods on every node say nothing about a node (issue 22): a RuntimeDefault DaemonSet pod on
// each node fills every node's union when counted, so a web pod ties between the node running
// its twin and the node running a database; excluded (the default), the twin wins.
func TestDaemonSetPodsExcluded(t *testing.T) {
	web := []string{"read", "write", "accept", "epoll_wait", "sendfile"}
	webB := []string{"read", "write", "accept", "epoll_wait", "writev"}
	db := []string{"read", "write", "fsync", "pread64", "pwrite64"}
	full := append(append(append([]string{}, web...), db...), "writev", "ptrace", "mount", "bpf")
	objs := []*unstructured.Unstructured{
		seccompProfile("default", "web-a", "", web...), seccompProfile("default", "web-b", "", webB...),
		seccompProfile("default", "db-a", "", db...), seccompProfile("default", DefaultProfileName, "", full...),
	}
	daemon := func(e *env, node string) *v1.Pod {
		return e.newPod("agent-"+node, func(p *v1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: ptr(true)}}
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
		})
	}
	for _, tc := range []struct {
		name     string
		args     *Args
		wantNorm []int64 // n1 (web-a), n2 (db-a); the lowest ExS gets 100 − 100·raw/max
	}{
		{"excluded by default: the twin's node wins", nil, []int64{67, 0}},
		{"counted: every union is full and the nodes tie", &Args{DaemonSetPods: DaemonSetPodsCount}, []int64{0, 0}},
		{"excluded by selector too", &Args{DaemonSetPods: DaemonSetPodsCount, ExcludedPodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"every": "node"}}}, []int64{67, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args != nil {
				parsed, err := ParseArgs(args)
				if err != nil {
					t.Fatal(err)
				}
				args = parsed
			}
			e := newEnv(t, shapeCluster, args, objs...)
			for _, n := range []string{"n1", "n2"} {
				d := daemon(e, n)
				d.Labels = map[string]string{"every": "node"}
				e.pl.st.addPod(d, n, false, nil)
			}
			e.pl.st.addPod(e.newPod("web-a", withPodProfile(e.path("default", "web-a"))), "n1", false, nil)
			e.pl.st.addPod(e.newPod("db-a", withPodProfile(e.path("default", "db-a"))), "n2", false, nil)
			_, norm, _ := e.scoreAll(e.newPod("web-b", withPodProfile(e.path("default", "web-b"))), []string{"n1", "n2"})
			if fmt.Sprint(norm) != fmt.Sprint(tc.wantNorm) {
				t.Fatalf("normalised scores %v, want %v", norm, tc.wantNorm)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func containerdDefaultSize(t *testing.T) int {
	d, err := profiles.ContainerdDefault()
	if err != nil {
		t.Fatal(err)
	}
	return len(d.Syscalls)
}

// What each way of not naming a Localhost profile counts as, under each mapping (issue 22):
// RuntimeDefault is the runtime's default profile, not everything; Unconfined is everything; a
// configured profile overrides the shipped data; unset follows the kubelet's default.
func TestRuntimeDefaultMapping(t *testing.T) {
	objs := []*unstructured.Unstructured{
		seccompProfile("", DefaultProfileName, "", "a", "b", "c", "d", "e", "f", "g"),
		seccompProfile("", "crio-default", "", "read", "write", "futex"),
	}
	rd := containerdDefaultSize(t)
	runtimeDefault := func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
	}
	ann := func(v string) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Annotations = map[string]string{annotationPodSeccomp: v} }
	}
	unconfined := func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}
	}
	// full is the full profile plus every name any profile mentions when it is missing; here
	// it is present, so "full" means its 7 syscalls.
	for _, tc := range []struct {
		name     string
		args     *Args
		pod      func(*v1.Pod)
		want     int
		wantFull bool
	}{
		{"RuntimeDefault field: containerd's set", nil, runtimeDefault, rd, false},
		{"runtime/default annotation: containerd's set", nil, ann("runtime/default"), rd, false},
		{"docker/default annotation: containerd's set", nil, ann("docker/default"), rd, false},
		{"Unconfined: full", nil, unconfined, 7, true},
		{"unset: full (the kubelet's default is Unconfined)", nil, nil, 7, true},
		{"unset on a --seccomp-default kubelet: containerd's set", &Args{UnsetProfile: UnsetRuntimeDefault}, nil, rd, false},
		{"runtimeDefault Full: full", &Args{RuntimeDefault: RuntimeDefaultFull}, runtimeDefault, 7, true},
		{"a configured profile overrides the data", &Args{RuntimeDefaultProfileName: "crio-default"}, runtimeDefault, 3, false},
		{"a configured profile that is missing: full, and said", &Args{RuntimeDefaultProfileName: "nope"}, runtimeDefault, 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args != nil {
				var err error
				if args, err = ParseArgs(args); err != nil {
					t.Fatal(err)
				}
			}
			e := newEnv(t, shapeCluster, args, objs...)
			got := e.pl.st.podSet(e.newPod("p", tc.pod))
			if got.size != tc.want || got.usesFull != tc.wantFull {
				t.Fatalf("size %d full %v, want %d %v (missing %v)", got.size, got.usesFull, tc.want, tc.wantFull, got.missing)
			}
			if tc.name == "a configured profile that is missing: full, and said" && len(got.missing) != 1 {
				t.Fatalf("missing %v, want the configured profile named", got.missing)
			}
		})
	}
}

// Bindings as SPO v1 applies them (issue 22): a podSelector narrows a binding to the pods it
// selects; among several bindings for one image the last by name wins (the webhook overwrites
// with each in turn); a binding whose profile does not exist is skipped, as SPO skips it, and
// the record says so.
func TestBindingsAsSPO(t *testing.T) {
	withSelector := func(u *unstructured.Unstructured, labels map[string]any) *unstructured.Unstructured {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"matchLabels": labels}, "spec", "podSelector")
		return u
	}
	e := newEnv(t, shapeCluster, nil,
		seccompProfile("", "all-syscalls", "", "a", "b", "c", "d", "e"),
		seccompProfile("", "web", "", "a"), seccompProfile("", "web2", "", "a", "b"), seccompProfile("", "db", "", "c"),
		withSelector(binding("default", "a-web-tier", "nginx", "web"), map[string]any{"tier": "web"}),
		binding("default", "b-dbs", "postgres", "db"), binding("default", "c-dbs-later", "postgres", "web2"),
		binding("default", "d-ghost", "redis", "ghost"))
	pod := func(image string, labels map[string]string) *v1.Pod {
		return e.newPod("p", func(p *v1.Pod) {
			p.Labels = labels
			p.Spec.Containers = []v1.Container{{Name: "c", Image: image}}
		})
	}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		want     int
		wantNote string
	}{
		{"selected by the podSelector: bound", pod("nginx", map[string]string{"tier": "web"}), 1, ""},
		{"outside the podSelector: unconfined, as SPO leaves it", pod("nginx", map[string]string{"tier": "batch"}), 5, ""},
		{"two bindings for one image: the last by name wins", pod("postgres", nil), 2, ""},
		{"a binding to a missing profile is skipped (unconfined here), and said", pod("redis", nil), 5,
			"ProfileBinding default/d-ghost names SeccompProfile ghost, which does not exist; skipped, as SPO does"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := e.pl.st.podSet(tc.pod)
			if ps.size != tc.want {
				t.Fatalf("set size %d, want %d (notes %v)", ps.size, tc.want, ps.notes())
			}
			notes := strings.Join(ps.notes(), "; ")
			// (These tests' made-up syscall names get notes of their own; only binding notes count here.)
			if (tc.wantNote == "") == strings.Contains(notes, "ProfileBinding") || !strings.Contains(notes, tc.wantNote) {
				t.Fatalf("notes %q, want %q", notes, tc.wantNote)
			}
		})
	}
	// The missing profile appears: the binding applies from then on.
	e.createProfile(seccompProfile("", "ghost", "", "d"))
	e.eventually("the binding to apply once its profile exists", func() bool { return e.setSize(pod("redis", nil)) == 1 })
	// An invalid selector binds nothing, as SPO skips such a binding.
	bad := withSelector(binding("default", "e-bad", "memcached", "db"), nil)
	_ = unstructured.SetNestedSlice(bad.Object, []any{map[string]any{"key": "x", "operator": "Near"}}, "spec", "podSelector", "matchExpressions")
	if b, err := profiles.ParseBinding(bad.Object); b != nil || err == nil || !strings.Contains(err.Error(), "podSelector") {
		t.Fatalf("invalid selector: binding %+v, err %v; want none and an error naming spec.podSelector", b, err)
	}
}
