// Package simagents runs Berth's real agent code for simulated nodes that come and go, as an
// autoscaler makes them: a real DaemonSet places one (KWOK-run) agent pod on every node it
// selects, and for each such pod this process starts pkg/agent with a token bound to that pod
// and a fixture /proc and cgroup tree. The fixture holds the node at a base load plus what its
// pods use, and each pod uses what its UseAnnotation says.
//
// Why a DaemonSet and not bare agent pods (as e2e/bench/placement binds them): an autoscaler
// counts a bare pod as a workload, so a node holding only an agent would never be empty and
// never removed; a DaemonSet's pods are what autoscalers ignore on a real cluster too.
package simagents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/agent"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
)

// UseAnnotation on a pod gives the CPU it uses, as a quantity ("100m"); a pod without it uses
// nothing. Memory is not simulated (the fixture's memory stays at the node's base).
const UseAnnotation = "e2e.berth.dev/cpu-use"

// DaemonSetName is the DaemonSet whose pods the agents take the identity of.
const DaemonSetName = "berth-agent-sim"

// Options say which nodes get agents and how the agents run.
type Options struct {
	// NodeSelector is the DaemonSet's node selector: the nodes that get an agent.
	NodeSelector map[string]string
	// WatcherURL is the load watcher the agents report to (started with --source=agent and
	// --agent-service-account=<stack.AgentNamespace>/<stack.AgentServiceAccount>).
	WatcherURL string
	// BaseCPU is every node's own CPU use in percent, besides its pods.
	BaseCPU, BaseMemory float64
	// Sample and Report are the agents' intervals; Windows their window lengths (nil: 5/10/15 min).
	Sample, Report time.Duration
	Windows        []time.Duration
	// Dir holds the fixtures and token files.
	Dir string
}

// Fleet is the running set of simulated agents.
type Fleet struct {
	c      *cluster.Cluster
	o      Options
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	agents map[string]*nodeAgent // node name → its agent
	pods   cache.Indexer
}

type nodeAgent struct {
	dir      string
	fx       *fixture.Node
	milliCPU int64 // the node's allocatable CPU, which pods' uses are shares of
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start creates the DaemonSet (with the agent identity stack uses) and keeps one agent running
// per Running DaemonSet pod until Stop.
func Start(ctx context.Context, c *cluster.Cluster, o Options) (*Fleet, error) {
	if o.WatcherURL == "" || len(o.NodeSelector) == 0 || o.Dir == "" {
		return nil, fmt.Errorf("simagents: WatcherURL, NodeSelector and Dir are required")
	}
	if err := stack.EnsureAgentIdentity(ctx, c, stack.AgentNamespace, stack.AgentServiceAccount); err != nil {
		return nil, err
	}
	if _, err := c.Client.AppsV1().DaemonSets(stack.AgentNamespace).Create(ctx, daemonSet(o.NodeSelector), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("simagents: creating DaemonSet: %w", err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{c: c, o: o, cancel: cancel, agents: map[string]*nodeAgent{}}
	f.pods = f.watchPods(fctx)
	f.wg.Add(1)
	go func() { defer f.wg.Done(); f.loop(fctx) }()
	c.OnStop(f.Stop)
	return f, nil
}

// daemonSet is a DaemonSet of fake agent pods (KWOK runs them) with the chart agent's requests
// and service account, tolerating every taint as the chart's does.
func daemonSet(sel map[string]string) *appsv1.DaemonSet {
	labels := map[string]string{"app": DaemonSetName}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: DaemonSetName, Namespace: stack.AgentNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: stack.AgentServiceAccount,
					NodeSelector:       sel,
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "agent", Image: "berth-agent:e2e",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("32Mi")}}}},
				},
			},
		},
	}
}

// watchPods keeps an index of every pod by node name: the agents' pods and the workloads whose
// use the fixtures carry.
func (f *Fleet) watchPods(ctx context.Context) cache.Indexer {
	lw := cache.NewListWatchFromClient(f.c.Client.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{"node": func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	go inf.Run(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	return inf.GetIndexer()
}

// loop starts agents for new DaemonSet pods, stops those whose pod or node went, and writes
// every fixture's load, until ctx ends.
func (f *Fleet) loop(ctx context.Context) {
	adv := time.NewTicker(min(f.o.Sample/4, 100*time.Millisecond))
	defer adv.Stop()
	resync := time.NewTicker(500 * time.Millisecond)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			f.stopAll()
			return
		case <-adv.C:
			f.mu.Lock()
			for _, a := range f.agents {
				if err := a.fx.Advance(); err != nil {
					klog.ErrorS(err, "Advancing a fixture failed", "root", a.fx.Root)
				}
			}
			f.mu.Unlock()
		case <-resync.C:
			f.reconcile(ctx)
		}
	}
}

// reconcile matches the agents to the Running DaemonSet pods and writes each node's load.
func (f *Fleet) reconcile(ctx context.Context) {
	want := map[string]*corev1.Pod{}
	for _, obj := range f.pods.List() {
		p := obj.(*corev1.Pod)
		if p.Namespace == stack.AgentNamespace && p.Labels["app"] == DaemonSetName && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			want[p.Spec.NodeName] = p
		}
	}
	f.mu.Lock()
	for node := range f.agents {
		if want[node] == nil {
			f.stopAgent(node)
		}
	}
	f.mu.Unlock()
	for node, pod := range want {
		f.mu.Lock()
		_, ok := f.agents[node]
		f.mu.Unlock()
		if !ok {
			if err := f.startAgent(ctx, node, pod); err != nil {
				klog.ErrorS(err, "Starting a simulated agent failed; retrying", "node", node)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for node, a := range f.agents {
		if err := f.writeLoad(node, a); err != nil {
			klog.ErrorS(err, "Writing a fixture failed", "node", node)
		}
	}
}

// writeLoad sets a node's fixture to its base load plus its pods' uses.
func (f *Fleet) writeLoad(node string, a *nodeAgent) error {
	objs, _ := f.pods.ByIndex("node", node)
	cpu := f.o.BaseCPU
	var pods []fixture.Pod
	for _, obj := range objs {
		p := obj.(*corev1.Pod)
		q, err := resource.ParseQuantity(p.Annotations[UseAnnotation])
		if err != nil || p.Status.Phase != corev1.PodRunning || a.milliCPU <= 0 {
			continue
		}
		share := float64(q.MilliValue()) / float64(a.milliCPU) * 100
		cpu += share
		pods = append(pods, fixture.Pod{UID: string(p.UID), QOS: "burstable", CPU: share})
	}
	if err := a.fx.Set(min(cpu, 100), f.o.BaseMemory); err != nil {
		return err
	}
	return a.fx.SetPods(pods)
}

// startAgent runs pkg/agent for node with a token bound to its DaemonSet pod.
func (f *Fleet) startAgent(ctx context.Context, node string, pod *corev1.Pod) error {
	n, err := f.c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	tok, err := stack.MintToken(ctx, f.c, stack.AgentServiceAccount, pod)
	if err != nil {
		return err
	}
	dir := filepath.Join(f.o.Dir, node)
	fx, err := fixture.New(filepath.Join(dir, "proc"), f.o.BaseCPU, f.o.BaseMemory)
	if err != nil {
		return err
	}
	if err := fx.EnableCgroups(filepath.Join(dir, "cgroup")); err != nil {
		return err
	}
	milli := n.Status.Allocatable.Cpu().MilliValue()
	if err := fx.SetCPUs(int(max(milli/1000, 1))); err != nil {
		return err
	}
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte(tok), 0o600); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(&rest.Config{Host: f.c.Host, BearerToken: tok, UserAgent: "berth-agent",
		TLSClientConfig: rest.TLSClientConfig{CAFile: f.c.PKI.CACert}})
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{NodeName: node, ProcRoot: fx.Root, WatcherURL: f.o.WatcherURL, TokenFile: tf,
		Listen: "127.0.0.1:0", SampleInterval: f.o.Sample, ReportInterval: f.o.Report, Client: client,
		CgroupRoot: fx.CgroupRoot(), Windows: f.o.Windows})
	if err != nil {
		return err
	}
	a.Sampler().Backfill(f.o.BaseCPU, f.o.BaseMemory)
	actx, cancel := context.WithCancel(ctx)
	na := &nodeAgent{dir: dir, fx: fx, milliCPU: milli, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(na.done)
		if err := a.Run(actx); err != nil && actx.Err() == nil {
			klog.ErrorS(err, "Simulated agent stopped", "node", node)
		}
	}()
	f.mu.Lock()
	f.agents[node] = na
	f.mu.Unlock()
	return nil
}

// Nodes returns the nodes that have a running agent.
func (f *Fleet) Nodes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.agents))
	for n := range f.agents {
		out = append(out, n)
	}
	return out
}

func (f *Fleet) stopAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for node := range f.agents {
		f.stopAgent(node)
	}
}

// stopAgent ends node's agent and removes its files (a removed node leaves nothing behind).
// why under f.mu: the writer holds it too, so no fixture write races the removal.
func (f *Fleet) stopAgent(node string) {
	a := f.agents[node]
	a.cancel()
	<-a.done
	if err := os.RemoveAll(a.dir); err != nil {
		klog.ErrorS(err, "Removing a simulated agent's files failed", "dir", a.dir)
	}
	delete(f.agents, node)
}

// Stop ends every agent and removes their files; safe to call twice. The DaemonSet stays: it
// is the cluster's, and goes with it (Stop runs from the cluster's OnStop, after the API server
// has ended).
func (f *Fleet) Stop() {
	f.cancel()
	f.wg.Wait()
}
