// Package bench measures scheduling throughput of scheduler profiles side by side on the same
// local cluster. Following upstream scheduler_perf, nodes and pods are bare API objects (no
// kubelet, no KWOK): the figure is the scheduler's, not the node simulator's.
//
// Pod creation through the API server is slower than scheduling on these machines, so every
// pod is created while the scheduler under test is stopped; then the scheduler starts and the
// clock runs from its first binding to its last. Profiles alternate within each round.
package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// SchedulerName is the profile name every benchmarked scheduler runs, so pods are identical.
const SchedulerName = "bench-scheduler"

// Profile is one scheduler configuration under test.
type Profile struct {
	Name string
	// Binary in bin/: kube-scheduler (stock) or berth-scheduler.
	Binary string
	// Profiles is the YAML list under `profiles:` (schedulerName must be SchedulerName).
	Profiles string
	// Setup runs once before the first round (e.g. start a load watcher); optional.
	Setup func(ctx context.Context, c *cluster.Cluster) error
	// PodMutator adjusts each pod of this profile's runs before it is created (e.g. to give
	// it a seccomp profile); optional. The pod's name is pod-NNNNN with its index.
	PodMutator func(*corev1.Pod)
}

// StockProfile is the upstream kube-scheduler with its default plugins.
func StockProfile() Profile {
	return Profile{Name: "kube-scheduler (stock)", Binary: cluster.DefaultScheduler, Profiles: "- schedulerName: " + SchedulerName + "\n"}
}

// BerthDefaultProfile is berth-scheduler with the upstream default plugins only.
func BerthDefaultProfile() Profile {
	return Profile{Name: "berth-scheduler (default plugins)", Binary: cluster.BerthScheduler, Profiles: "- schedulerName: " + SchedulerName + "\n"}
}

var extraProfiles []func() Profile

// RegisterProfile adds a profile that schedbench measures after the stock and default ones
// (each plugin issue registers its own from its own file).
func RegisterProfile(p func() Profile) { extraProfiles = append(extraProfiles, p) }

// AllProfiles is the stock profile, berth-scheduler with default plugins, then every
// registered one.
func AllProfiles() []Profile {
	out := []Profile{StockProfile(), BerthDefaultProfile()}
	for _, p := range extraProfiles {
		out = append(out, p())
	}
	return out
}

// Options size the benchmark.
type Options struct {
	Nodes, Pods, Rounds int
	NodeCPU, NodeMemory string
	PodCPU, PodMemory   string
	Profiles            []Profile
	// Dir keeps the cluster's state and logs (default: a temporary directory removed at the end).
	Dir  string
	Logf func(string, ...any)
	// ProfileDir, when set, receives CPU and block profiles of every scheduler run (pprof.go).
	ProfileDir string
	// KWOK runs KWOK and lets it manage the nodes (leases, status) and the bound pods (Running);
	// without it nodes and pods are bare API objects, as in upstream's scheduler_perf.
	KWOK bool
	// SidecarPID, when set, names a process whose peak RSS each run records (the load watcher).
	SidecarPID func() int
}

// Run is one profile's measurement in one round.
type Run struct {
	Profile  string
	Round    int
	Pods     int
	Duration time.Duration // first to last binding
	PodsPerS float64
	// CPU is the scheduler process's user+system CPU from its first to its last binding: a
	// figure that other load on a shared machine disturbs less than pods/s.
	CPU time.Duration
	// SchedulerRSS and SidecarRSS are peak resident sets (VmHWM) at the end of the run, bytes.
	SchedulerRSS, SidecarRSS int64
	// Exactly-once: pods bound exactly once, pods bound more than once or moved to another
	// node, and lines of the scheduler's log reporting a refused or conflicting binding.
	BoundOnce, BoundTwice, Conflicts int
	// WatcherOutages are lines of the scheduler's log saying a load-aware plugin could not
	// fetch the load watcher's document.
	WatcherOutages int
	// Batched is how many cycles the scheduler's own metrics say used the framework's
	// opportunistic-batching hint instead of filtering and scoring every node.
	Batched int
}

// CPUPerPod is the scheduler's CPU per pod bound, in milliseconds.
func (r Run) CPUPerPod() float64 {
	if r.Pods <= 1 {
		return 0
	}
	return float64(r.CPU) / float64(time.Millisecond) / float64(r.Pods-1)
}

// Result holds every run.
type Result struct {
	Options Options
	Runs    []Run
}

// Execute starts a cluster, creates the nodes, and measures every profile Rounds times.
func Execute(ctx context.Context, o Options) (*Result, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.NodeCPU == "" {
		o.NodeCPU, o.NodeMemory = "4", "32Gi"
	}
	if o.PodCPU == "" {
		o.PodCPU, o.PodMemory = "100m", "128Mi"
	}
	c, err := cluster.Start(ctx, cluster.Config{Dir: o.Dir, WithoutKWOK: !o.KWOK, WithoutDefaultScheduler: true, WithoutControllerManager: true, Logf: o.Logf})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	o.Logf("creating %d nodes", o.Nodes)
	if err := createNodes(ctx, c, o); err != nil {
		return nil, err
	}
	const ns = "bench"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	// No controller-manager runs here to create it, and admission refuses pods without it.
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	for _, p := range o.Profiles {
		if p.Setup != nil {
			if err := p.Setup(ctx, c); err != nil {
				return nil, fmt.Errorf("%s: setup: %w", p.Name, err)
			}
		}
	}
	res := &Result{Options: o}
	for round := 1; round <= o.Rounds; round++ {
		for _, p := range o.Profiles {
			run, err := measure(ctx, c, ns, p, o, round)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", p.Name, round, err)
			}
			run.Round = round
			o.Logf("%s round %d: %d pods in %s = %.1f pods/s", p.Name, round, run.Pods, run.Duration, run.PodsPerS)
			res.Runs = append(res.Runs, run)
		}
	}
	return res, nil
}

func createNodes(ctx context.Context, c *cluster.Cluster, o Options) error {
	specs := make([]cluster.NodeSpec, o.Nodes)
	for i := range specs {
		specs[i] = cluster.NodeSpec{Name: fmt.Sprintf("bench-node-%04d", i), CPU: o.NodeCPU, Memory: o.NodeMemory}
	}
	return parallel(ctx, 16, len(specs), func(i int) error { return c.AddNodes(ctx, specs[i]) })
}

func measure(ctx context.Context, c *cluster.Cluster, ns string, p Profile, o Options, round int) (Run, error) {
	rv, err := createBenchPods(ctx, c, ns, p, o)
	if err != nil {
		return Run{}, err
	}
	// Bindings are timestamped as they arrive, from before the scheduler starts: a scheduler
	// can bind many pods before its readiness probe passes.
	bindings := make(chan timedBinding, o.Pods)
	watchDone := make(chan error, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	tally := newBindTally()
	go func() {
		watchDone <- watchBindings(watchCtx, c.Client, ns, rv, tally, func(pod string) {
			bindings <- timedBinding{pod, time.Now()}
		})
	}()

	id := cluster.SchedulerIdentity
	sched, err := c.StartScheduler(ctx, cluster.SchedulerOptions{Binary: p.Binary, Name: "bench-" + p.Binary, Identity: &id, Config: benchSchedulerConfig(p)})
	if err != nil {
		return Run{}, err
	}
	defer c.StopComponent(sched.Process)
	stopProfiling := func() {}
	if o.ProfileDir != "" {
		if stopProfiling, err = startProfiling(ctx, c, sched.Port, o.ProfileDir, fmt.Sprintf("%s-r%d", slug(p.Name), round), o.Logf); err != nil {
			return Run{}, err
		}
	}
	w, err := waitAllBound(ctx, sched, p, o, bindings, watchDone)
	if err != nil {
		return Run{}, err
	}
	stopProfiling()
	run := Run{Profile: p.Name, Pods: o.Pods, Duration: w.last.Sub(w.first), CPU: w.cpuLast - w.cpuFirst}
	if err := readSchedulerCounts(ctx, c, sched, p, o, &run); err != nil {
		return Run{}, err
	}
	c.StopComponent(sched.Process)
	// A second binding would arrive after the last first one: give the watch a moment.
	time.Sleep(time.Second)
	run.BoundOnce, run.BoundTwice = tally.counts()
	if run.Conflicts, err = bindingConflicts(sched.LogPath); err != nil {
		return Run{}, err
	}
	if run.WatcherOutages, err = countLines(sched.LogPath, watcherOutageLines); err != nil {
		return Run{}, err
	}
	// Force-delete: no kubelet will ever confirm these pods' termination.
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: "bench=yes"}); err != nil {
		return Run{}, err
	}
	return run, waitNoPods(ctx, c.Client, ns)
}

// createBenchPods creates the round's pods (pending: no scheduler runs yet) and returns the
// resource version to watch their bindings from.
func createBenchPods(ctx context.Context, c *cluster.Cluster, ns string, p Profile, o Options) (string, error) {
	o.Logf("%s: creating %d pods", p.Name, o.Pods)
	spec := framework.PodSpec(SchedulerName, o.PodCPU, o.PodMemory)
	err := parallel(ctx, 16, o.Pods, func(i int) error {
		pod := framework.Pod(ns, fmt.Sprintf("pod-%05d", i), map[string]string{"bench": "yes"}, spec)
		if p.PodMutator != nil {
			p.PodMutator(pod)
		}
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return "", err
	}
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "bench=yes", Limit: 1})
	if err != nil {
		return "", err
	}
	return list.ResourceVersion, nil
}

// benchSchedulerConfig is the scheduler's configuration for profile p: no client-side rate
// limit and no leader election, so the bench measures scheduling alone.
func benchSchedulerConfig(p Profile) string {
	return "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" +
		"clientConnection: {qps: 5000, burst: 5000}\nleaderElection: {leaderElect: false}\nprofiles:\n" + p.Profiles
}

// timedBinding is a pod's first binding and when the watch saw it.
type timedBinding struct {
	pod string
	at  time.Time
}

// bindWindow is when the first and the last pod were bound, and the scheduler's CPU time then.
type bindWindow struct {
	first, last       time.Time
	cpuFirst, cpuLast time.Duration
}

// waitAllBound waits until all o.Pods pods are bound, failing when the watch fails, the
// scheduler exits, time runs out or ctx ends.
func waitAllBound(ctx context.Context, sched *cluster.SchedulerProcess, p Profile, o Options, bindings <-chan timedBinding, watchDone <-chan error) (bindWindow, error) {
	var w bindWindow
	timeout := time.After(time.Duration(o.Pods)*50*time.Millisecond + time.Minute)
	for n := 0; n < o.Pods; n++ {
		select {
		case b := <-bindings:
			if w.first.IsZero() {
				w.first = b.at
				w.cpuFirst, _ = ProcessCPU(sched.PID())
			}
			w.last = b.at
			if n == o.Pods-1 {
				w.cpuLast, _ = ProcessCPU(sched.PID())
			}
		case err := <-watchDone:
			return w, err
		case <-sched.Done():
			return w, fmt.Errorf("%s exited after %d bindings:\n%s", p.Binary, n, sched.Tail(20))
		case <-timeout:
			return w, fmt.Errorf("only %d of %d pods bound", n, o.Pods)
		case <-ctx.Done():
			return w, ctx.Err()
		}
	}
	return w, nil
}

// readSchedulerCounts fills in what the running scheduler reports about the round: batched
// cycles from its /metrics, its peak RSS (and the sidecar's), and the throughput.
func readSchedulerCounts(ctx context.Context, c *cluster.Cluster, sched *cluster.SchedulerProcess, p Profile, o Options, run *Run) error {
	var err error
	if run.Batched, err = batchedCycles(ctx, c, sched.Port); err != nil {
		return fmt.Errorf("%s: reading batching from its /metrics: %w", p.Binary, err)
	}
	run.SchedulerRSS, _ = PeakRSS(sched.PID())
	if o.SidecarPID != nil {
		run.SidecarRSS, _ = PeakRSS(o.SidecarPID())
	}
	if run.Duration > 0 {
		run.PodsPerS = float64(o.Pods-1) / run.Duration.Seconds()
	}
	return nil
}

// watchBindings reports each pod's first binding once and tallies every change of each pod's
// node. The API server closes long watches (and slow ones under load), so it resumes from the
// last resource version it saw.
func watchBindings(ctx context.Context, client kubernetes.Interface, ns, rv string, tally *bindTally, bound func(pod string)) error {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "bench=yes", ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return fmt.Errorf("watching pods after %d bindings: %w", len(seen), err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				w.Stop()
				return fmt.Errorf("pod watch failed after %d bindings: %v", len(seen), apierrors.FromObject(ev.Object))
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			rv = pod.ResourceVersion
			if ev.Type != watch.Deleted && ev.Type != watch.Bookmark {
				tally.observe(pod.Name, pod.Spec.NodeName)
			}
			if ev.Type == watch.Deleted || ev.Type == watch.Bookmark || pod.Spec.NodeName == "" || seen[pod.Name] {
				continue
			}
			seen[pod.Name] = true
			bound(pod.Name)
		}
	}
	return ctx.Err()
}

func waitNoPods(ctx context.Context, client kubernetes.Interface, ns string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Everything().String(), Limit: 1})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("pods of the previous run still present")
}

func parallel(ctx context.Context, workers, n int, f func(int) error) error {
	var wg sync.WaitGroup
	idx := make(chan int)
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := f(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
loop:
	for i := 0; i < n; i++ {
		select {
		case idx <- i:
		case err := <-errs:
			close(idx)
			wg.Wait()
			return err
		case <-ctx.Done():
			break loop
		}
	}
	close(idx)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

// Summary is a profile's figures over all rounds.
type Summary struct {
	Profile          string
	Median, Min, Max float64
	// MedianCPU is the median of the runs' scheduler CPU per pod (ms).
	MedianCPU float64
}

// Summaries returns each profile's median, min and max pods/s, in profile order.
func (r *Result) Summaries() []Summary {
	var out []Summary
	for _, p := range r.Options.Profiles {
		var v, cpu []float64
		for _, run := range r.Runs {
			if run.Profile == p.Name {
				v = append(v, run.PodsPerS)
				cpu = append(cpu, run.CPUPerPod())
			}
		}
		if len(v) == 0 {
			continue
		}
		sort.Float64s(v)
		sort.Float64s(cpu)
		out = append(out, Summary{Profile: p.Name, Median: median(v), Min: v[0], Max: v[len(v)-1], MedianCPU: median(cpu)})
	}
	return out
}

func median(v []float64) float64 {
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Print writes the table: every run, then each profile's median and its ratio to the first.
func (r *Result) Print(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "Scheduling throughput: %d nodes, %d pods per run, %d rounds (profiles alternate)\n\n", o.Nodes, o.Pods, o.Rounds)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile\tround\tpods\tfirst→last binding\tpods/s\tscheduler CPU ms/pod\tbatched cycles\t")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.1f\t%.2f\t%d\t\n", run.Profile, run.Round, run.Pods, run.Duration.Round(time.Millisecond), run.PodsPerS, run.CPUPerPod(), run.Batched)
	}
	tw.Flush()
	sums := r.Summaries()
	if len(sums) == 0 {
		return
	}
	fmt.Fprintln(w)
	floor := r.floorProfile()
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "profile\tmedian pods/s\tmin\tmax\tratio to %s\tmedian CPU ms/pod\tCPU ratio (theirs/ours)\tCPU ÷ floor (paired)\t\n", strings.TrimSpace(sums[0].Profile))
	for _, s := range sums {
		cpuRatio := 0.0
		if s.MedianCPU > 0 {
			cpuRatio = sums[0].MedianCPU / s.MedianCPU
		}
		toFloor := "–"
		if v, ok := r.PairedCPURatio(s.Profile, floor); ok {
			toFloor = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%s\t\n", s.Profile, s.Median, s.Min, s.Max, s.Median/sums[0].Median, s.MedianCPU, cpuRatio, toFloor)
	}
	tw.Flush()
	if floor == "" {
		fmt.Fprintln(w, "(no floor profile in this run: add -profiles …,no-op for the CPU ÷ floor column)")
	}
}

// WithTwins returns profiles with, after each one run by berth-scheduler whose name contains
// one of the comma-separated substrings of only ("": every one), the same profile on binary
// (in bin/), named "… [binary]": an A/B of two builds paired within every round, so a change
// is judged against the machine's load of the same minute. binary "" returns profiles.
func WithTwins(profiles []Profile, binary, only string) []Profile {
	if binary == "" {
		return profiles
	}
	var out []Profile
	for _, p := range profiles {
		out = append(out, p)
		if p.Binary == cluster.BerthScheduler && nameMatches(p.Name, only) {
			t := p
			t.Name, t.Binary = twinName(p.Name, binary), binary
			// why: the twin's configuration names what the original's Setup serves (a load
			// watcher's address, profiles in the cluster); running it again would clash.
			t.Setup = nil
			out = append(out, t)
		}
	}
	return out
}

// nameMatches says whether name contains one of the comma-separated substrings of only, or
// only is empty.
func nameMatches(name, only string) bool {
	if only == "" {
		return true
	}
	for _, want := range strings.Split(only, ",") {
		if want != "" && strings.Contains(name, want) {
			return true
		}
	}
	return false
}

func twinName(profile, binary string) string { return profile + " [" + binary + "]" }

// PrintTwins writes, for every profile that has a twin on binary (WithTwins), the paired CPU
// ratio of the profile to its twin: below 1 when this build spends less per pod.
func (r *Result) PrintTwins(w io.Writer, binary string) {
	fmt.Fprintf(w, "\nCPU ms/pod of bin/%s ÷ bin/%s, paired by round (median; per round):\n", cluster.BerthScheduler, binary)
	for _, p := range r.Options.Profiles {
		twin := twinName(p.Name, binary)
		v, ok := r.PairedCPURatio(p.Name, twin)
		if !ok {
			continue
		}
		var rounds []string
		for _, a := range r.Runs {
			for _, b := range r.Runs {
				if a.Profile == p.Name && b.Profile == twin && a.Round == b.Round && b.CPUPerPod() > 0 {
					rounds = append(rounds, fmt.Sprintf("%.3f", a.CPUPerPod()/b.CPUPerPod()))
				}
			}
		}
		fmt.Fprintf(w, "  %s: %.3f (%s)\n", p.Name, v, strings.Join(rounds, " "))
	}
}

// floorProfile is the name of the run's floor profile (FloorBinary), or "".
func (r *Result) floorProfile() string {
	for _, p := range r.Options.Profiles {
		if p.Binary == FloorBinary {
			return p.Name
		}
	}
	return ""
}

// PairedCPURatio is the median over rounds of a's CPU per pod divided by b's in the same
// round. Profiles alternate within a round, so the pair shares the machine's state of the
// moment: the steadier figure on a shared machine, where one round's load can move every
// profile by more than the difference measured.
func (r *Result) PairedCPURatio(a, b string) (float64, bool) {
	if a == "" || b == "" {
		return 0, false
	}
	byRound := map[int]float64{}
	for _, run := range r.Runs {
		if run.Profile == b && run.CPUPerPod() > 0 {
			byRound[run.Round] = run.CPUPerPod()
		}
	}
	var v []float64
	for _, run := range r.Runs {
		if d, ok := byRound[run.Round]; ok && run.Profile == a {
			v = append(v, run.CPUPerPod()/d)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	sort.Float64s(v)
	return median(v), true
}
