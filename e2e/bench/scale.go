package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// The scale benchmark: berth-scheduler with the default plugins and with the full Berth
// profile on the same nodes and pods, the load-aware plugins fed by the real berth-loadwatcher
// binary, which every node's (simulated) agent reports to with its own pod-bound token, as a
// DaemonSet's agents would. Running 5000 berth-agent processes is out of reach on a small
// machine (one is ~34 MiB), so this process POSTs each node's report with that node's agent
// token: the watcher authenticates (TokenReview), authorises (the token's pod runs on the
// node) and serves them exactly as from real agents.

// ScaleOptions size the scale benchmark.
type ScaleOptions struct {
	Nodes, Pods, Rounds int
	// KWOK lets KWOK manage the nodes and pods (see Options.KWOK).
	KWOK bool
	// ReportEvery is how often every node's report is pushed again (fresh load for each).
	ReportEvery time.Duration
	Dir         string
	ProfileDir  string
	Logf        func(string, ...any)
}

// ScaleResult is the measurement plus the pipeline's own figures.
type ScaleResult struct {
	*Result
	Reports, RefusedReports int64
	// WatcherNodes is how many nodes the watcher served fresh when the first run started.
	WatcherNodes int
}

// ExecuteScale runs the scale benchmark.
func ExecuteScale(ctx context.Context, so ScaleOptions) (*ScaleResult, error) {
	if so.Logf == nil {
		so.Logf = func(string, ...any) {}
	}
	if so.ReportEvery == 0 {
		so.ReportEvery = time.Minute
	}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	feed := &agentFeed{url: "http://127.0.0.1:" + strconv.Itoa(port), port: port, every: so.ReportEvery, logf: so.Logf}
	// Node CPU and memory as in schedbench; 10 000 pods of 100m/128Mi fit 5000 nodes twice over.
	o := Options{Nodes: so.Nodes, Pods: so.Pods, Rounds: so.Rounds, KWOK: so.KWOK, Dir: so.Dir, ProfileDir: so.ProfileDir, Logf: so.Logf,
		Profiles:   []Profile{BerthDefaultProfile(), fullBerthProfile(feed.url, feed.setup)},
		SidecarPID: feed.pid}
	res, err := Execute(ctx, o)
	if err != nil {
		return nil, err
	}
	return &ScaleResult{Result: res, Reports: feed.sent.Load(), RefusedReports: feed.refused.Load(), WatcherNodes: feed.freshAtStart}, nil
}

// agentFeed runs berth-loadwatcher and keeps every node's report fresh.
type agentFeed struct {
	url          string
	port         int
	every        time.Duration
	logf         func(string, ...any)
	watcher      *cluster.Process
	sent         atomic.Int64
	refused      atomic.Int64
	freshAtStart int
}

func (f *agentFeed) pid() int {
	if f.watcher == nil {
		return 0
	}
	return f.watcher.PID()
}

func (f *agentFeed) setup(ctx context.Context, c *cluster.Cluster) error {
	if err := ensureAgentNamespace(ctx, c); err != nil {
		return err
	}
	if err := stack.EnsureAgentIdentity(ctx, c, stack.AgentNamespace, stack.AgentServiceAccount); err != nil {
		return err
	}
	if err := f.startWatcher(ctx, c); err != nil {
		return err
	}
	names, tokens, err := f.mintAgentTokens(ctx, c)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var seq atomic.Uint64
	push := func(ctx context.Context) error {
		return parallel(ctx, 16, len(names), func(i int) error {
			r := syntheticReport(names[i], time.Now())
			r.Instance, r.Seq = "bench", seq.Add(1)
			return f.post(ctx, client, tokens[i], &r)
		})
	}
	f.logf("pushing %d reports", len(names))
	if err := push(ctx); err != nil {
		return err
	}
	if err := f.checkAllFresh(ctx, c, len(names)); err != nil {
		return err
	}
	go f.keepPushing(ctx, push)
	return nil
}

// ensureAgentNamespace creates the agents' namespace and its default account: no controller
// manager runs here to create the account, which EnsureAgentIdentity would wait for.
func ensureAgentNamespace(ctx context.Context, c *cluster.Cluster) error {
	const ns = stack.AgentNamespace
	for _, create := range []func() error{
		func() error {
			_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// startWatcher starts berth-loadwatcher with its least-privilege identity, accepting the
// agents' account.
func (f *agentFeed) startWatcher(ctx context.Context, c *cluster.Cluster) error {
	const ns, sa = stack.AgentNamespace, stack.AgentServiceAccount
	kc, err := stack.WatcherKubeconfig(ctx, c, "bench-berth-loadwatcher", ns)
	if err != nil {
		return err
	}
	// Reviews are cached longer than a run, so a report costs the API server nothing after
	// its first (the chart's default is a minute; a real agent's token rotates within an hour).
	f.watcher, err = c.StartComponent(ctx, cluster.ProcessSpec{Name: "bench-berth-loadwatcher", Binary: filepath.Join(c.BinDir, "berth-loadwatcher"),
		Args: []string{"--listen=127.0.0.1:" + strconv.Itoa(f.port), "--kubeconfig=" + kc, "--agent-service-account=" + ns + "/" + sa,
			"--token-cache-ttl=1h", "--stale-after=5m"}}, cluster.HTTPCheck(f.url+"/readyz"))
	return err
}

// mintAgentTokens creates one agent pod per node and mints a pod-bound token for each: the
// nodes' names and their agents' tokens, index for index.
func (f *agentFeed) mintAgentTokens(ctx context.Context, c *cluster.Cluster) (names, tokens []string, err error) {
	const ns, sa = stack.AgentNamespace, stack.AgentServiceAccount
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	f.logf("minting %d agent tokens (one agent pod per node)", len(nodes.Items))
	tokens = make([]string, len(nodes.Items))
	err = parallel(ctx, 16, len(nodes.Items), func(i int) error {
		node := nodes.Items[i].Name
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "berth-agent-" + node, Namespace: ns, Labels: map[string]string{"app": "berth-agent"}},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
				Containers:  []corev1.Container{{Name: "agent", Image: "berth-agent:bench"}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		}
		created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		tokens[i], err = stack.MintToken(ctx, c, sa, created)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	names = make([]string, len(nodes.Items))
	for i, n := range nodes.Items {
		names[i] = n.Name
	}
	return names, tokens, nil
}

// checkAllFresh reads the watcher's document back and fails unless it serves all reported
// nodes fresh.
func (f *agentFeed) checkAllFresh(ctx context.Context, c *cluster.Cluster, reported int) error {
	// The watcher serves its document only to readers it can check.
	readerToken, err := c.WatcherReaderTokenFile(ctx)
	if err != nil {
		return err
	}
	reader := &http.Client{Timeout: 30 * time.Second, Transport: loadapi.NewTokenTransport(nil, readerToken)}
	if f.freshAtStart, err = freshNodes(ctx, reader, f.url); err != nil {
		return err
	}
	if f.freshAtStart != reported {
		return fmt.Errorf("the load watcher serves %d fresh nodes of %d reported", f.freshAtStart, reported)
	}
	f.logf("load watcher serves all %d nodes fresh", f.freshAtStart)
	return nil
}

// keepPushing pushes a round of reports every f.every until ctx ends.
func (f *agentFeed) keepPushing(ctx context.Context, push func(context.Context) error) {
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := push(ctx); err != nil && ctx.Err() == nil {
				f.logf("pushing reports: %v", err)
			}
		}
	}
}

func (f *agentFeed) post(ctx context.Context, client *http.Client, token string, r *loadapi.Report) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+loadapi.ReportPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	f.sent.Add(1)
	if resp.StatusCode/100 != 2 {
		f.refused.Add(1)
		return fmt.Errorf("watcher refused the report of %s: %s %s", r.Node, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// freshNodes counts the nodes the watcher serves with metrics and not stale.
func freshNodes(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+loadapi.ReportPath, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var doc loadapi.Response
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return 0, err
	}
	n := 0
	for name := range doc.Data.NodeMetricsMap {
		if st, ok := doc.Nodes[name]; !ok || !st.Stale {
			n++
		}
	}
	return n, nil
}

// Print writes the scale table: per profile median pods/s, scheduler CPU per pod, the ratio to
// the first profile (berth-scheduler with default plugins), peak RSS of the scheduler and of the
// watcher, and the exactly-once checks summed over the runs.
func (r *ScaleResult) Print(w io.Writer) {
	r.Result.Print(w)
	o := r.Options
	fmt.Fprintf(w, "\nScale: %d nodes (%s), %d pods per run, %d round(s); load watcher: real berth-loadwatcher, %d nodes fresh at start, %d reports pushed (%d refused)\n\n",
		o.Nodes, map[bool]string{true: "KWOK", false: "bare Node objects"}[o.KWOK], o.Pods, o.Rounds, r.WatcherNodes, r.Reports, r.RefusedReports)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile\tmedian pods/s\tratio\tCPU ms/pod\tCPU ratio\tscheduler peak RSS\twatcher peak RSS\tbound once\tbound twice\tlost\tbinding conflicts\t")
	sums := r.Summaries()
	for _, s := range sums {
		var rss, wrss int64
		var once, twice, lost, conflicts, pods int
		for _, run := range r.Runs {
			if run.Profile != s.Profile {
				continue
			}
			rss, wrss = max(rss, run.SchedulerRSS), max(wrss, run.SidecarRSS)
			once += run.BoundOnce
			twice += run.BoundTwice
			lost += run.Pods - run.BoundOnce - run.BoundTwice
			conflicts += run.Conflicts
			pods += run.Pods
		}
		cpuRatio := 0.0
		if s.MedianCPU > 0 {
			cpuRatio = sums[0].MedianCPU / s.MedianCPU
		}
		watcher := "-"
		if wrss > 0 && strings.Contains(s.Profile, "full") {
			watcher = fmt.Sprintf("%d MiB", wrss>>20)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%.2f\t%.2f\t%d MiB\t%s\t%d/%d\t%d\t%d\t%d\t\n", s.Profile, s.Median, s.Median/sums[0].Median,
			s.MedianCPU, cpuRatio, rss>>20, watcher, once, pods, twice, lost, conflicts)
	}
	tw.Flush()
}

// ExactlyOnce reports whether every run bound every pod exactly once without conflicts.
func (r *ScaleResult) ExactlyOnce() error {
	for _, run := range r.Runs {
		if run.BoundOnce != run.Pods || run.BoundTwice != 0 || run.Conflicts != 0 {
			return fmt.Errorf("%s round %d: %d of %d pods bound once, %d twice, %d binding conflicts in its log",
				run.Profile, run.Round, run.BoundOnce, run.Pods, run.BoundTwice, run.Conflicts)
		}
		if run.WatcherOutages != 0 {
			return fmt.Errorf("%s round %d: the load watcher was unreachable (%d log lines): load-aware scores were neutral",
				run.Profile, run.Round, run.WatcherOutages)
		}
	}
	return nil
}
