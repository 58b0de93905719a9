package placement

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/agent/load"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
)

// Options size and pace the benchmark.
type Options struct {
	Scenario ScenarioOptions
	Runs     []RunConfig
	// SampleInterval and ReportInterval are the agents' flags; WavePause must exceed the
	// report interval plus the scheduler's refresh so each wave sees the previous one reported.
	SampleInterval, ReportInterval time.Duration
	WavePause, Settle              time.Duration
	// PollInterval is how often the benchmark reads the watcher for its figures.
	PollInterval time.Duration
	// RefreshSeconds is the plugins' refreshIntervalSeconds.
	RefreshSeconds int
	// KillWatcherAtWave stops the load watcher at the start of that wave (1-based) of every
	// run, a failure drill; 0: never.
	KillWatcherAtWave int
	// TimeScale compresses the agents' windows (5, 10, 15 minutes × TimeScale) and is what
	// WavePause is chosen with (a real wave interval × TimeScale), so the window's length against
	// the arrivals is a real cluster's; node-minutes are reported in real-cluster time (÷
	// TimeScale). 0: 1 (real windows, as before the realistic mode).
	TimeScale float64
	// Target is the utilisation overshoot is measured from (TargetLoadPacking's target).
	Target float64
	// Dir keeps the cluster's state and logs (default: a temporary directory, removed).
	Dir  string
	Logf func(string, ...any)
}

// Defaults fills unset pacing with values that make a 50-node, 600-pod run take about a
// minute: agents sample every 500 ms and report every second (flags the agent accepts), the
// scheduler refreshes every second, waves are 5 s apart.
func (o *Options) Defaults() {
	if o.SampleInterval == 0 {
		o.SampleInterval = 500 * time.Millisecond
	}
	if o.ReportInterval == 0 {
		o.ReportInterval = time.Second
	}
	if o.WavePause == 0 {
		o.WavePause = 5 * time.Second
	}
	if o.Settle == 0 {
		o.Settle = 8 * time.Second
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Second
	}
	if o.RefreshSeconds == 0 {
		o.RefreshSeconds = 1
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.TimeScale == 0 {
		o.TimeScale = 1
	}
	if o.Target == 0 {
		o.Target = DefaultTarget
	}
}

// profileMinAge is the workload profiles' minAgeSeconds on the run's time scale (a real
// minute × TimeScale, at least 1 s); 0 at scale 1, the plugins' own default.
func (o *Options) profileMinAge() int {
	if o.TimeScale == 1 {
		return 0
	}
	return max(1, int(math.Round(60*o.TimeScale)))
}

// windows are the agents' scaled window lengths (nil at scale 1: the agent's own).
func (o *Options) windows() []time.Duration {
	if o.TimeScale == 1 {
		return nil
	}
	out := make([]time.Duration, len(load.Windows))
	for i, w := range load.Windows {
		out[i] = time.Duration(float64(w) * o.TimeScale)
	}
	return out
}

// bench is the part that lives for a whole benchmark: the cluster with the scenario's nodes,
// and the pipeline (agent identities, fixtures).
type bench struct {
	c     *cluster.Cluster
	p     *pipeline
	close func()
	runs  int
}

// startBench starts the cluster, creates sc's nodes and the pipeline. close undoes all of it.
func startBench(ctx context.Context, o Options, sc *Scenario) (b *bench, err error) {
	c, err := cluster.Start(ctx, cluster.Config{Dir: o.Dir, WithoutBerthCRDs: true, Logf: o.Logf})
	if err != nil {
		return nil, err
	}
	var undo []func()
	b = &bench{c: c, close: func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		c.Stop()
	}}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	// The in-process agents log through klog; their per-push lines would drown the table.
	restoreLog, err := logToFile(filepath.Join(c.Dir, "logs", "placement-agents.log"))
	if err != nil {
		return nil, err
	}
	undo = append(undo, restoreLog)
	o.Logf("creating %d nodes", len(sc.Nodes))
	err = parallel(ctx, 8, len(sc.Nodes), func(i int) error {
		n := sc.Nodes[i]
		return c.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: strconv.FormatInt(n.MilliCPU, 10) + "m",
			Memory: strconv.FormatInt(n.MemoryMiB, 10) + "Mi", Pods: 110})
	})
	if err != nil {
		return nil, err
	}
	o.Logf("starting the agent identities and fixture /proc trees")
	// Two advances per agent sample: every sample sees the counters move (one written
	// file per pod per advance is what the simulated cgroups cost).
	p, err := newPipeline(ctx, c, sc, o.SampleInterval/2)
	if err != nil {
		return nil, err
	}
	undo = append(undo, p.stop)
	b.p = p
	return b, nil
}

// run replays sc once with rc on the bench.
func (b *bench) run(ctx context.Context, o Options, sc *Scenario, rc RunConfig) (*RunResult, error) {
	b.runs++
	b.p.sc = sc
	return runOne(ctx, b.c, b.p, o, rc, fmt.Sprintf("placement-r%d", b.runs))
}

// Result is the whole benchmark.
type Result struct {
	Options  Options
	Scenario *Scenario
	Runs     []*RunResult
}

// Execute starts one local cluster (KWOK nodes, the stock kube-scheduler), creates the
// scenario's nodes and agent identities once, then replays the scenario once per run config.
// A run that goes wrong (watcher down, pods that cannot be placed) is reported in its row; only
// a failure to build the cluster or a run's scheduler is an error.
func Execute(ctx context.Context, o Options) (*Result, error) {
	o.Defaults()
	if o.WavePause <= o.ReportInterval+time.Duration(o.RefreshSeconds)*time.Second {
		return nil, fmt.Errorf("wave pause %s must exceed the report interval (%s) plus the scheduler's refresh (%ds)",
			o.WavePause, o.ReportInterval, o.RefreshSeconds)
	}
	sc, err := Generate(o.Scenario)
	if err != nil {
		return nil, err
	}
	b, err := startBench(ctx, o, sc)
	if err != nil {
		return nil, err
	}
	defer b.close()
	res := &Result{Options: o, Scenario: sc}
	for i, rc := range o.Runs {
		o.Logf("run %d/%d: %s", i+1, len(o.Runs), rc.Name)
		r, err := b.run(ctx, o, sc, rc)
		if err != nil {
			return res, fmt.Errorf("%s: %w", rc.Name, err)
		}
		o.Logf("%s: %s", rc.Name, r.summary())
		res.Runs = append(res.Runs, r)
	}
	return res, nil
}

var logMu sync.Mutex

// logToFile sends klog to path until the returned function puts it back on stderr (before
// the cluster directory holding the file is removed).
func logToFile(path string) (restore func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	logMu.Lock()
	defer logMu.Unlock()
	// klog copies errors to stderr whatever the output unless the threshold is raised.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.LogToStderr(false)
	klog.SetOutput(f)
	return func() {
		logMu.Lock()
		defer logMu.Unlock()
		klog.Flush()
		_ = fs.Set("stderrthreshold", "ERROR")
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
		_ = f.Close()
	}, nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// simulate rewrites every node's fixture /proc from the accounting: bursty pods get new
// draws once a second, loads are written a few times per agent sample.
func simulate(ctx context.Context, p *pipeline, acct *Accounting, seed uint64, sample time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 1))
	tick := time.NewTicker(sample / 2)
	defer tick.Stop()
	last := map[string][2]float64{}
	lastPods := map[string][]PodShare{}
	lastDraw := time.Time{}
	for {
		if time.Since(lastDraw) >= time.Second {
			acct.Redraw(rng)
			lastDraw = time.Now()
		}
		for _, n := range p.sc.Nodes {
			cpu, mem, _ := acct.Load(n.Name)
			if v := ([2]float64{cpu, mem}); last[n.Name] != v {
				if err := p.fixtures[n.Name].Set(cpu, mem); err != nil {
					klog.ErrorS(err, "Writing a fixture /proc failed", "node", n.Name)
					continue
				}
				last[n.Name] = v
			}
			// The pods' own cgroups, which the agents read per-pod usage from.
			if shares := acct.PodShares(n.Name); !slices.Equal(shares, lastPods[n.Name]) {
				pods := make([]fixture.Pod, len(shares))
				for i, sh := range shares {
					pods[i] = fixture.Pod{UID: sh.UID, QOS: "burstable", CPU: min(sh.CPU, 100),
						MemoryBytes: uint64(sh.Memory / 100 * fixture.MemTotalKB * 1024)}
				}
				if err := p.fixtures[n.Name].SetPods(pods); err != nil {
					klog.ErrorS(err, "Writing a fixture cgroup failed", "node", n.Name)
					continue
				}
				lastPods[n.Name] = shares
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// podObject is a scenario pod: its requests (and CPU limit, if any) and the scheduler name.
func podObject(ns, schedulerName string, ps PodSpec) *corev1.Pod {
	spec := framework.PodSpec(schedulerName, strconv.FormatInt(ps.ReqMilliCPU, 10)+"m", strconv.FormatInt(ps.ReqMemMiB, 10)+"Mi")
	if ps.LimMilliCPU > 0 {
		spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(ps.LimMilliCPU, resource.DecimalSI)}
	}
	return framework.Pod(ns, ps.Name, map[string]string{"app": "placement", "class": ps.Class}, spec)
}
