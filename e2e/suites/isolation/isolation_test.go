// Package isolation runs InstanceIsolation end to end: the real control plane with KWOK nodes
// tainted and labelled as IPP's instance pool, the real berth-scheduler with the profiles the
// operator renders (main, isolated "both"-mode profile, and a strict one), pods in several
// namespaces, and a simulated cluster autoscaler that adds a pool node when a classed pod
// reports FailedScheduling.
package isolation

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

const (
	mainProfile     = "berth-scheduler"
	isolatedProfile = "berth-scheduler-isolated"
	strictProfile   = "berth-strict"
	poolLabel       = "ipp"
	suiteLabel      = "berth-e2e-isolation"
	poolNodes       = 20
	podsPerNode     = 20
	classes         = 10
	pods            = 200
)

var namespaces = []string{"iso-a", "iso-b", "iso-c"}

type env struct {
	c     *cluster.Cluster
	added int // nodes the simulated autoscaler added
	mu    sync.Mutex
	// stopWebhook stops the in-process isolation webhook (nil: not started).
	stopWebhook func()
}

// poolNode is a node of IPP's pool: label ipp=true, taint ipp=true:NoSchedule.
func poolNode(name, pool string) cluster.NodeSpec {
	return cluster.NodeSpec{Name: name, CPU: "8", Memory: "32Gi", Pods: podsPerNode,
		Labels: map[string]string{poolLabel: "true", suiteLabel: pool},
		Taints: []corev1.Taint{{Key: poolLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
}

// classedPod is what IPP's webhook makes of a pod: toleration and nodeSelector for the pool,
// the class label, and in "both" mode the anti-affinity term and the isolated profile.
func classedPod(ns, name, pool, class, scheduler string, term bool) *corev1.Pod {
	spec := framework.PodSpec(scheduler, "10m", "16Mi")
	spec.Tolerations = cluster.TolerateSimulated([]corev1.Toleration{{Key: poolLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}})
	spec.NodeSelector = map[string]string{poolLabel: "true", suiteLabel: pool}
	if term {
		spec.Affinity = framework.IPPAntiAffinity(class)
	}
	labels := map[string]string{"case": pool}
	if class != "" {
		labels[framework.ClassLabel] = class
	}
	return framework.Pod(ns, name, labels, spec)
}

// TestInstanceIsolation runs every case on one cluster and one berth-scheduler process with
// three profiles: berth-scheduler (InstanceIsolation, packing weight 10) and its isolated
// profile, both rendered by the operator's code, plus berth-strict (strict: true).
func TestInstanceIsolation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{})
	for _, ns := range append(namespaces, "iso-strict") {
		if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
			t.Fatal(err)
		}
	}
	// why: a class belongs to its pods' namespace unless an InstanceClass shares it; the classes
	// here cross the three namespaces, as the migration's InstanceClasses keep them (created
	// before the scheduler, whose first cycle waits for them).
	for i := 0; i < classes; i++ {
		framework.CreateInstanceClass(ctx, t, c.RESTConfig, fmt.Sprintf("class-%d", i), namespaces...)
	}
	main, err := framework.InstanceIsolationProfiles(mainProfile, isolatedProfile, 10, configv1.InstanceIsolationArgs{})
	if err != nil {
		t.Fatal(err)
	}
	strict, err := framework.InstanceIsolationProfiles(strictProfile, "", 10, configv1.InstanceIsolationArgs{Strict: ptr.To(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Config: framework.SchedulerConfig(main, strict)}); err != nil {
		t.Fatal(err)
	}
	e := &env{c: c}
	var specs []cluster.NodeSpec
	for i := 0; i < poolNodes; i++ {
		specs = append(specs, poolNode(fmt.Sprintf("pool-%02d", i), "main"))
	}
	if err := c.AddNodes(ctx, specs...); err != nil {
		t.Fatal(err)
	}

	t.Run("200 pods of 10 classes in 3 namespaces: no node holds two classes", func(t *testing.T) {
		// Classes cross namespaces (class k has pods in all three, shared by InstanceClass
		// class-k), and namespace iso-c goes
		// through the isolated profile with IPP's term, so both profiles share the nodes.
		var created []*corev1.Pod
		for i := 0; i < pods; i++ {
			ns := namespaces[i%len(namespaces)]
			scheduler, term := mainProfile, false
			if ns == "iso-c" {
				scheduler, term = isolatedProfile, true
			}
			p := classedPod(ns, fmt.Sprintf("p-%03d", i), "main", fmt.Sprintf("class-%d", i%classes), scheduler, term)
			created = append(created, e.create(ctx, t, p))
		}
		byNode := e.waitBound(ctx, t, created)
		used := 0
		for node, cls := range byNode {
			if len(cls) > 1 {
				t.Errorf("node %s holds classes %v", node, keys(cls))
			}
			used++
		}
		t.Logf("%d pods of %d classes on %d of %d nodes", pods, classes, used, poolNodes)
	})

	t.Run("more classes than nodes: Pending with the reason until the autoscaler adds a node", func(t *testing.T) {
		free := poolNodes - len(e.classesByNode(ctx, t, "main"))
		if free < 0 {
			t.Fatalf("negative free nodes")
		}
		// One pod per new class: free of them land, the last has no node left.
		var created []*corev1.Pod
		for i := 0; i <= free; i++ {
			created = append(created, e.create(ctx, t, classedPod("iso-b", fmt.Sprintf("extra-%02d", i), "main", fmt.Sprintf("extra-%02d", i), mainProfile, false)))
		}
		var pending *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			unbound := 0
			for _, p := range created {
				got, err := c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				if got.Spec.NodeName == "" {
					unbound++
					pending = got
				}
			}
			return unbound == 1 && e.failedScheduling(ctx, pending) != "", nil
		})
		if err != nil {
			t.Fatalf("want exactly one of %d new classes pending with a FailedScheduling event: %v", len(created), err)
		}
		msg := e.failedScheduling(ctx, pending)
		if !strings.Contains(msg, "holds instance class") {
			t.Fatalf("FailedScheduling of %s does not name the class in the way: %q", pending.Name, msg)
		}
		t.Logf("%s pending: %s", pending.Name, msg)

		stop := e.autoscale(ctx, t, "main")
		defer stop()
		node := e.waitBound(ctx, t, []*corev1.Pod{pending})
		for n := range node {
			if !strings.HasPrefix(n, "scaled-") {
				t.Errorf("%s landed on %s, want the autoscaler's node", pending.Name, n)
			}
		}
		if e.addedNodes() != 1 {
			t.Errorf("autoscaler added %d nodes, want 1", e.addedNodes())
		}
		for n, cls := range e.classesByNode(ctx, t, "main") {
			if len(cls) > 1 {
				t.Errorf("node %s holds classes %v", n, keys(cls))
			}
		}
	})

	t.Run("strict: classed and unclassed pods keep apart", func(t *testing.T) {
		if err := c.AddNodes(ctx, poolNode("strict-1", "strict"), poolNode("strict-2", "strict")); err != nil {
			t.Fatal(err)
		}
		plain := classedPod("iso-strict", "plain-0", "strict", "", strictProfile, false)
		plain.Spec.NodeSelector[corev1.LabelHostname] = "strict-1"
		plainNode := e.waitBound(ctx, t, []*corev1.Pod{e.create(ctx, t, plain)})
		if _, ok := plainNode["strict-1"]; !ok {
			t.Fatalf("unclassed pod on %v, want strict-1", keys(plainNode))
		}
		classed := e.create(ctx, t, classedPod("iso-strict", "classed-0", "strict", "s", strictProfile, false))
		if got := e.waitBound(ctx, t, []*corev1.Pod{classed}); got["strict-2"] == nil {
			t.Fatalf("classed pod on %v, want strict-2 (strict-1 holds an unclassed pod)", keys(got))
		}
		// An unclassed pod that may only use strict-2 (class s) stays pending, with the reason.
		plain2 := classedPod("iso-strict", "plain-1", "strict", "", strictProfile, false)
		plain2.Spec.NodeSelector[corev1.LabelHostname] = "strict-2"
		p2 := e.create(ctx, t, plain2)
		var msg string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			msg = e.failedScheduling(ctx, p2)
			return msg != "", nil
		}); err != nil {
			t.Fatalf("unclassed pod on a classed node was not refused in strict mode")
		}
		if !strings.Contains(msg, "holds instance class iso-strict/s (strict") {
			t.Fatalf("FailedScheduling %q does not give the strict reason", msg)
		}
		got, err := c.Client.CoreV1().Pods(p2.Namespace).Get(ctx, p2.Name, metav1.GetOptions{})
		if err != nil || got.Spec.NodeName != "" {
			t.Fatalf("unclassed pod bound to %q in strict mode (err %v)", got.Spec.NodeName, err)
		}
	})

	// Last: it installs the chart's admission objects, which would refuse the unclassed pods
	// tolerating the pool taint that the steps above create.
	t.Run("a tenant with the edit role gets no DaemonSet pod onto the pool: the policy, then the webhook, refuse them", func(t *testing.T) {
		e.tenantDaemonSets(ctx, t)
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (e *env) create(ctx context.Context, t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := e.c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// waitBound waits until every pod has a node, then returns node → classes → pod count, read
// back from the API server.
func (e *env) waitBound(ctx context.Context, t *testing.T, ps []*corev1.Pod) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		out = map[string]map[string]int{}
		for _, p := range ps {
			got, err := e.c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.Spec.NodeName == "" {
				return false, nil
			}
			if out[got.Spec.NodeName] == nil {
				out[got.Spec.NodeName] = map[string]int{}
			}
			out[got.Spec.NodeName][got.Labels[framework.ClassLabel]]++
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("not every pod of %d bound: %v", len(ps), err)
	}
	return out
}

// classesByNode reads every pod of a pool back: node → class → count.
func (e *env) classesByNode(ctx context.Context, t *testing.T, pool string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	for _, ns := range namespaces {
		list, err := e.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "case=" + pool})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			if out[p.Spec.NodeName] == nil {
				out[p.Spec.NodeName] = map[string]int{}
			}
			out[p.Spec.NodeName][p.Labels[framework.ClassLabel]]++
		}
	}
	return out
}

// failedScheduling is the message of the pod's latest FailedScheduling event ("" if none).
func (e *env) failedScheduling(ctx context.Context, p *corev1.Pod) string {
	evs, err := e.c.Client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": p.Name, "reason": "FailedScheduling"}.String()})
	if err != nil || len(evs.Items) == 0 {
		return ""
	}
	sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
	return evs.Items[len(evs.Items)-1].Message
}

func (e *env) addedNodes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.added
}

// autoscale is a simulated cluster autoscaler: every second it looks for classed pods of the
// pool that are unbound and have a FailedScheduling event, and adds one pool node for each
// pod it has not scaled for yet. It stops when the returned function is called.
func (e *env) autoscale(ctx context.Context, t *testing.T, pool string) (stop func()) {
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		scaled := map[string]bool{}
		_ = wait.PollUntilContextCancel(actx, time.Second, true, func(ctx context.Context) (bool, error) {
			for _, ns := range namespaces {
				list, err := e.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "case=" + pool + "," + framework.ClassLabel})
				if err != nil {
					return false, nil
				}
				for i := range list.Items {
					p := &list.Items[i]
					key := p.Namespace + "/" + p.Name
					if p.Spec.NodeName != "" || scaled[key] || e.failedScheduling(ctx, p) == "" {
						continue
					}
					scaled[key] = true
					e.mu.Lock()
					e.added++
					name := fmt.Sprintf("scaled-%02d", e.added)
					e.mu.Unlock()
					if err := e.c.AddNodes(ctx, poolNode(name, pool)); err != nil && ctx.Err() == nil {
						t.Errorf("autoscaler: %v", err)
					}
				}
			}
			return false, nil
		})
	}()
	return func() { cancel(); <-done }
}
