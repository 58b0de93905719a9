package placement

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/agent"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
)

// pipeline is the part of the real load path that lives for the whole benchmark: the agent
// identity (one fake agent pod and one pod-bound token per node, as a DaemonSet's pods would
// have) and one fixture /proc tree per node that the simulator rewrites.
//
// Why the agents run in this process and not as 50 berth-agent processes: one berth-agent
// process measured 34 MiB RSS and ~0.75 % of a core idle (sampling at 250 ms, no informer),
// so 50 of them are ~1.7 GiB and a third of a core on a shared 2-core machine before
// anything is scheduled, plus 50 fork/execs per run. cmd/agent is a thin main around
// agent.New(cfg).Run(ctx); running that same pkg/agent code once per node in this process,
// each agent with its own pod-bound token, its own pod informer (field selector on its node)
// and its own /metrics listener, POSTing real HTTP reports to the real berth-loadwatcher
// binary, keeps everything the scheduler sees identical at a fraction of the cost.
type pipeline struct {
	c         *cluster.Cluster
	sc        *Scenario
	dir       string
	watcherKC string
	tokens    map[string]string // node → token file
	fixtures  map[string]*fixture.Node
	stop      func()
}

const (
	agentNamespace = stack.AgentNamespace
	agentAccount   = stack.AgentServiceAccount
)

func newPipeline(ctx context.Context, c *cluster.Cluster, sc *Scenario, advance time.Duration) (*pipeline, error) {
	p := &pipeline{c: c, sc: sc, dir: filepath.Join(c.Dir, "placement"), tokens: map[string]string{}, fixtures: map[string]*fixture.Node{}}
	if err := stack.EnsureAgentIdentity(ctx, c, agentNamespace, agentAccount); err != nil {
		return nil, err
	}
	kc, err := stack.WatcherKubeconfig(ctx, c, "placement-berth-loadwatcher", agentNamespace)
	if err != nil {
		return nil, err
	}
	p.watcherKC = kc
	var mu sync.Mutex
	err = parallel(ctx, 8, len(sc.Nodes), func(i int) error {
		n := sc.Nodes[i]
		pod, err := stack.AgentPod(ctx, c, agentNamespace, agentAccount, "berth-agent-"+n.Name, n.Name, chartAgentRequests)
		if err != nil {
			return err
		}
		tok, err := stack.MintToken(ctx, c, agentAccount, pod)
		if err != nil {
			return err
		}
		dir := filepath.Join(p.dir, n.Name)
		fx, err := fixture.New(filepath.Join(dir, "proc"), n.BaseCPU, n.BaseMemory)
		if err != nil {
			return err
		}
		// The agents read per-pod usage from this cgroup tree, written by the simulator.
		if err := fx.EnableCgroups(filepath.Join(dir, "cgroup")); err != nil {
			return err
		}
		if err := fx.SetCPUs(int(max(n.MilliCPU/1000, 1))); err != nil {
			return err
		}
		tf := filepath.Join(dir, "token")
		if err := os.WriteFile(tf, []byte(tok), 0o600); err != nil {
			return err
		}
		mu.Lock()
		p.tokens[n.Name], p.fixtures[n.Name] = tf, fx
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	// One writer moves every fixture's CPU counters on, several times per agent sample, so
	// each sample reads exactly the load last set. It stops before the cluster directory is
	// removed (it would otherwise recreate files in a directory being deleted).
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(advance)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				for _, fx := range p.fixtures {
					if err := fx.Advance(); err != nil {
						klog.ErrorS(err, "Advancing a fixture /proc failed", "root", fx.Root)
					}
				}
			}
		}
	}()
	var once sync.Once
	p.stop = func() { once.Do(func() { cancel(); <-done }) }
	c.OnStop(p.stop)
	return p, nil
}

// resetLoads puts every node back at its base load and without pods (the same cluster state
// for every run).
func (p *pipeline) resetLoads() error {
	for _, n := range p.sc.Nodes {
		if err := p.fixtures[n.Name].Set(n.BaseCPU, n.BaseMemory); err != nil {
			return err
		}
		if err := p.fixtures[n.Name].SetPods(nil); err != nil {
			return err
		}
	}
	return nil
}

// live is one run's watcher and agents.
type live struct {
	watcher    *stack.Watcher
	cancel     context.CancelFunc
	agentsDone sync.WaitGroup
	agentErrs  chan error
}

// startLive starts a fresh berth-loadwatcher process and a fresh agent per node (empty
// sample rings, so no run inherits the previous run's averages) and waits until the watcher
// serves every node.
// windows are the agents' window lengths (nil: the real 5, 10 and 15 minutes); each agent's
// windows start full of its node's base load, as on a node that has been up for a while.
func (p *pipeline) startLive(ctx context.Context, name string, sample, report time.Duration, windows []time.Duration) (*live, error) {
	w, err := stack.StartWatcher(ctx, p.c, "berth-loadwatcher-"+name, p.watcherKC,
		"--source=agent", "--agent-service-account="+agentNamespace+"/"+agentAccount)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	l := &live{watcher: w, cancel: cancel, agentErrs: make(chan error, len(p.sc.Nodes))}
	for _, n := range p.sc.Nodes {
		tok, err := os.ReadFile(p.tokens[n.Name])
		if err != nil {
			l.stop(p.c)
			return nil, err
		}
		rc := &rest.Config{Host: p.c.Host, BearerToken: string(tok), UserAgent: "berth-agent",
			TLSClientConfig: rest.TLSClientConfig{CAFile: p.c.PKI.CACert}}
		client, err := kubernetes.NewForConfig(rc)
		if err != nil {
			l.stop(p.c)
			return nil, err
		}
		a, err := agent.New(agent.Config{NodeName: n.Name, ProcRoot: p.fixtures[n.Name].Root, WatcherURL: w.URL,
			TokenFile: p.tokens[n.Name], Listen: "127.0.0.1:0", SampleInterval: sample, ReportInterval: report, Client: client,
			CgroupRoot: p.fixtures[n.Name].CgroupRoot(), Windows: windows})
		if err != nil {
			l.stop(p.c)
			return nil, err
		}
		a.Sampler().Backfill(n.BaseCPU, n.BaseMemory)
		l.agentsDone.Add(1)
		go func() {
			defer l.agentsDone.Done()
			if err := a.Run(actx); err != nil {
				l.agentErrs <- fmt.Errorf("agent %s: %w", n.Name, err)
			}
		}()
	}
	names := make([]string, len(p.sc.Nodes))
	for i, n := range p.sc.Nodes {
		names[i] = n.Name
	}
	if _, err := stack.WaitFresh(ctx, w.URL, names, time.Minute); err != nil {
		l.stop(p.c)
		return nil, fmt.Errorf("%w\nload watcher log:\n%s", err, w.Tail(10))
	}
	return l, nil
}

// chartAgentRequests gives a fake agent pod the requests the chart's DaemonSet gives the real
// one. why: the simulator writes no cgroup for it, so the scheduler never sees it measured;
// without requests TargetLoadPacking would predict it at defaultRequests (1 CPU) and add that
// to every node until the window has held the pod, in the first runs of a table only.
func chartAgentRequests(p *corev1.Pod) {
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
}

// stop ends the agents (waiting for them) and the watcher process.
func (l *live) stop(c *cluster.Cluster) {
	l.cancel()
	l.agentsDone.Wait()
	c.StopComponent(l.watcher.Process)
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, workers, n int, f func(int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	idx := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
