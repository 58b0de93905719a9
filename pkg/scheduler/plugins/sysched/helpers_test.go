package sysched

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/pkg/scheduler/plugins/plugintest"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/profiles"
)

type shape struct {
	version    string
	namespaced bool
}

var (
	shapeNamespaced = shape{version: "v1beta1", namespaced: true}
	shapeCluster    = shape{version: "v1", namespaced: false}
)

type env struct {
	t        *testing.T
	pl       *SySched
	dyn      *dynamicfake.FakeDynamicClient
	cs       *fake.Clientset
	recorder *events.FakeRecorder
	spGVR    schema.GroupVersionResource
	pbGVR    schema.GroupVersionResource
	shape    shape
	uid      int

	// activated are the pod keys the plugin handed back to the queue, call by call.
	mu        sync.Mutex
	activated [][]string
}

// takeActivated returns the Activate calls so far, each call's keys sorted, and clears them.
func (e *env) takeActivated() [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.activated
	e.activated = nil
	return out
}

// newEnv builds the plugin against fake API clients serving SPO in the given shape, with objs
// (SeccompProfiles / ProfileBindings as unstructured) already stored.
func newEnv(t *testing.T, sh shape, args *Args, objs ...*unstructured.Unstructured) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &env{t: t, shape: sh,
		spGVR: schema.GroupVersionResource{Group: profiles.Group, Version: sh.version, Resource: "seccompprofiles"},
		pbGVR: schema.GroupVersionResource{Group: profiles.Group, Version: "v1alpha1", Resource: "profilebindings"},
	}
	var ros []runtime.Object
	for _, o := range objs {
		if o.GetKind() == "SeccompProfile" {
			o.SetAPIVersion(profiles.Group + "/" + sh.version)
			if !sh.namespaced {
				o.SetNamespace("")
			}
		}
		ros = append(ros, o)
	}
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		e.spGVR: "SeccompProfileList", e.pbGVR: "ProfileBindingList",
	}, ros...)
	e.cs = fake.NewClientset()
	e.cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: profiles.Group + "/" + sh.version, APIResources: []metav1.APIResource{{Name: "seccompprofiles", Kind: "SeccompProfile", Namespaced: sh.namespaced}}},
		{GroupVersion: profiles.Group + "/v1alpha1", APIResources: []metav1.APIResource{{Name: "profilebindings", Kind: "ProfileBinding", Namespaced: true}}},
	}
	factory := informers.NewSharedInformerFactory(e.cs, 0)
	e.recorder = events.NewFakeRecorder(100)
	h := &plugintest.Handle{Factory: factory, Recorder: e.recorder, OnActivate: func(pods map[string]*v1.Pod) {
		var keys []string
		for k, p := range pods {
			if k != p.Namespace+"/"+p.Name {
				t.Errorf("activated under key %q: pod %s/%s", k, p.Namespace, p.Name)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		e.mu.Lock()
		e.activated = append(e.activated, keys)
		e.mu.Unlock()
	}}
	if args == nil {
		var err error
		args, err = ParseArgs(nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	pl, err := newWithClients(ctx, args, h, e.dyn, e.cs.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	e.pl = pl
	return e
}

func seccompProfile(ns, name, base string, syscalls ...string) *unstructured.Unstructured {
	names := make([]interface{}, len(syscalls))
	for i, s := range syscalls {
		names[i] = s
	}
	spec := map[string]interface{}{
		"defaultAction": "SCMP_ACT_ERRNO",
		"syscalls":      []interface{}{map[string]interface{}{"action": "SCMP_ACT_ALLOW", "names": names}},
	}
	if base != "" {
		spec["baseProfileName"] = base
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": profiles.Group + "/v1beta1", "kind": "SeccompProfile",
		"metadata": map[string]interface{}{"name": name}, "spec": spec,
	}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

func binding(ns, name, image, profile string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": profiles.Group + "/v1alpha1", "kind": "ProfileBinding",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"spec": map[string]interface{}{"image": image,
			"profileRef": map[string]interface{}{"kind": "SeccompProfile", "name": profile}},
	}}
}

// path returns the Localhost path SPO would publish for a profile in this env's shape.
func (e *env) path(ns, name string) string {
	if e.shape.namespaced {
		return fmt.Sprintf("operator/%s/%s.json", ns, name)
	}
	return fmt.Sprintf("operator/%s.json", name)
}

func (e *env) newPod(name string, mutate func(*v1.Pod)) *v1.Pod {
	e.uid++
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%s-%d", name, e.uid))},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func localhost(p string) *v1.SeccompProfile {
	return &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &p}
}

func withPodProfile(p string) func(*v1.Pod) {
	return func(pod *v1.Pod) { pod.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: localhost(p)} }
}

func nodeInfo(name string) fwk.NodeInfo { return plugintest.NodeInfo(name) }

// scoreAll runs PreScore, Score and NormalizeScore over nodes as the framework would and
// returns raw and normalised scores in node order.
func (e *env) scoreAll(pod *v1.Pod, nodes []string) (raw, norm []int64, cs fwk.CycleState) {
	e.t.Helper()
	ctx := context.Background()
	cs = framework.NewCycleState()
	infos := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		infos[i] = nodeInfo(n)
	}
	if st := e.pl.PreScore(ctx, cs, pod, infos); !st.IsSuccess() {
		e.t.Fatalf("PreScore: %v", st)
	}
	var list fwk.NodeScoreList
	for i, n := range nodes {
		s, st := e.pl.Score(ctx, cs, pod, infos[i])
		if !st.IsSuccess() {
			e.t.Fatalf("Score: %v", st)
		}
		// The score PreScore prepared (memo.go) is the one computed afresh.
		if fresh, st := e.pl.Score(ctx, framework.NewCycleState(), pod, infos[i]); !st.IsSuccess() || fresh != s {
			e.t.Fatalf("node %s: prepared score %d, fresh score %d (%v)", n, s, fresh, st)
		}
		raw = append(raw, s)
		list = append(list, fwk.NodeScore{Name: n, Score: s})
	}
	if st := e.pl.ScoreExtensions().NormalizeScore(ctx, cs, pod, list); !st.IsSuccess() {
		e.t.Fatalf("NormalizeScore: %v", st)
	}
	for _, ns := range list {
		norm = append(norm, ns.Score)
	}
	return raw, norm, cs
}

// schedule places pod on the best-scoring node (first in order on ties, like a deterministic
// tie-break) through Reserve, and returns that node.
func (e *env) schedule(pod *v1.Pod, nodes []string) string {
	e.t.Helper()
	_, norm, cs := e.scoreAll(pod, nodes)
	best := 0
	for i := range norm {
		if norm[i] > norm[best] {
			best = i
		}
	}
	if st := e.pl.Reserve(context.Background(), cs, pod, nodes[best]); !st.IsSuccess() {
		e.t.Fatalf("Reserve: %v", st)
	}
	return nodes[best]
}

func (e *env) setSize(pod *v1.Pod) int {
	return e.pl.st.podSet(pod).size
}

func (e *env) nodeUnion(node string) int {
	e.pl.st.mu.RLock()
	defer e.pl.st.mu.RUnlock()
	if ns := e.pl.st.nodes[node]; ns != nil {
		return ns.h.count()
	}
	return 0
}

func (e *env) nodePods(node string) int {
	e.pl.st.mu.RLock()
	defer e.pl.st.mu.RUnlock()
	if ns := e.pl.st.nodes[node]; ns != nil {
		return ns.n
	}
	return 0
}

func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		e.t.Fatalf("timed out waiting for %s", what)
	}
}

func (e *env) createProfile(u *unstructured.Unstructured) {
	e.t.Helper()
	u.SetAPIVersion(profiles.Group + "/" + e.shape.version)
	ri := e.dyn.Resource(e.spGVR)
	var err error
	if e.shape.namespaced {
		_, err = ri.Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
	} else {
		u.SetNamespace("")
		_, err = ri.Create(context.Background(), u, metav1.CreateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) updateProfile(u *unstructured.Unstructured) {
	e.t.Helper()
	u.SetAPIVersion(profiles.Group + "/" + e.shape.version)
	var err error
	if e.shape.namespaced {
		_, err = e.dyn.Resource(e.spGVR).Namespace(u.GetNamespace()).Update(context.Background(), u, metav1.UpdateOptions{})
	} else {
		u.SetNamespace("")
		_, err = e.dyn.Resource(e.spGVR).Update(context.Background(), u, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deleteProfile(ns, name string) {
	e.t.Helper()
	var err error
	if e.shape.namespaced {
		err = e.dyn.Resource(e.spGVR).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	} else {
		err = e.dyn.Resource(e.spGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// loadExample reads a multi-document YAML file from examples/sysched.
func loadExample(t *testing.T, file string) []map[string]interface{} {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "examples", "sysched", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]interface{}
	for _, doc := range splitYAML(raw) {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
	return out
}

func splitYAML(raw []byte) [][]byte {
	var docs [][]byte
	start := 0
	for i := 0; i+4 <= len(raw); i++ {
		if (i == 0 || raw[i-1] == '\n') && string(raw[i:i+3]) == "---" && (i+3 == len(raw) || raw[i+3] == '\n') {
			docs = append(docs, raw[start:i])
			start = i + 4
		}
	}
	return append(docs, raw[start:])
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var (
	metaCreate    = metav1.CreateOptions{}
	metaCreatePod = metav1.CreateOptions{}
	metaUpdate    = metav1.UpdateOptions{}
	metaDelete    = metav1.DeleteOptions{}
)
