package monitoring

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/isolation/webhook"
)

const (
	schedulerName = "berth-scheduler-monitoring"
	schedulerJob  = release + "-scheduler-metrics"
	watcherJob    = release + "-loadwatcher-metrics"
	agentJob      = release + "-agent-metrics"
	operatorJob   = release + "-operator-metrics"
	// The identity Prometheus scrapes with, and one the chart's role is not bound to.
	promNamespace = "monitoring"
	promAccount   = "prometheus"
	otherAccount  = "not-prometheus"
	// As testValues: the watcher alert's threshold and `for`, Prometheus' evaluation interval.
	watcherUnreachable = 3 * time.Second
	watcherFor         = 5 * time.Second
	evalInterval       = time.Second
	staleFor           = 3 * time.Second
	staleAfter         = 3 * time.Second
	noLeaderFor        = 2 * time.Second
)

// noData are the dashboard queries that cannot return data in this suite, and why. Every other
// panel query must.
var noData = map[string]string{
	"berth_agent_podnet_attachments": "PodConfig attachments need a real node with a CRI; this suite's agents run " +
		"on simulated nodes. The panel's query is evaluated with data by e2e/suites/helm (TestHelmPodConfigs), where " +
		"the real Prometheus scrapes the helm-installed agent on the real node",
}

// TestPrometheusScrapesBerth: the real Prometheus, configured from the chart's ServiceMonitors
// and PrometheusRule, scrapes berth-scheduler and berth-operator (HTTPS, bearer token,
// SubjectAccessReview), berth-loadwatcher and two berth-agents; every dashboard query returns data; the watcher alert
// fires within its `for` plus one evaluation of the watcher going away and resolves when it is
// back; the stale-nodes alert fires when the agents stop.
func TestPrometheusScrapesBerth(t *testing.T) {
	promBin := framework.NeedHostTool(t, "prometheus", "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := shared
	r, err := render()
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{schedulerJob, watcherJob, agentJob, operatorJob} {
		if r.endpoints[job] == nil {
			t.Fatalf("the chart rendered no ServiceMonitor %s (have %v)", job, keys(r.endpoints))
		}
	}
	dir := t.TempDir()

	// The load pipeline: two simulated nodes, their agents and the load watcher.
	loads := []stack.NodeLoad{{Name: "mon-node-a", CPU: 30, Memory: 40}, {Name: "mon-node-b", CPU: 60, Memory: 20}}
	for _, n := range loads {
		if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: "8", Memory: "16Gi", Pods: 110}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := stack.Start(ctx, c, stack.Options{Prefix: "mon-", Nodes: loads, Dir: filepath.Join(dir, "stack"),
		WatcherArgs: []string{"--stale-after=" + staleAfter.String()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopStack(c, st) })
	// Decision records on, as the chart's default: the dashboard's records panel reads them.
	// Leader election on, so the no-leader alert has a leader to lose; the Lease the harness
	// lets the scheduler's identity hold.
	tlp := strings.Replace(stack.TLPConfig(schedulerName, st.Watcher.URL, 40, 300, 1), "leaderElection:\n  leaderElect: false",
		"leaderElection:\n  leaderElect: true\n  resourceName: berth-scheduler\n  resourceNamespace: kube-system", 1)
	schedCfg, err := framework.WithDecisionRecord(tlp, nil)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-monitoring", Config: schedCfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopComponent(sched.Process) })

	// berth-operator, for its /metrics only (HTTPS behind TokenReview and SubjectAccessReview,
	// like the scheduler's, but controller-runtime's server rather than the scheduler's).
	installChartCRDs(ctx, t, c)
	opPort, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// With the chart's isolation webhook, on loopback, for the admissions panel.
	hookPort, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	hookAddr := "127.0.0.1:" + strconv.Itoa(hookPort)
	hookArgs, err := framework.ChartIsolationArgs(r.objs, release+"-operator", map[string]string{
		"--isolation-webhook-bind-address": hookAddr, "--isolation-webhook-cert-hosts": "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, namespace); err != nil {
		t.Fatal(err)
	}
	undoHook, err := framework.InstallChartWebhook(ctx, c.Client, r.objs, "https://"+hookAddr+webhook.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undoHook)
	op, err := framework.StartOperator(ctx, c, framework.OperatorOptions{Name: "berth-operator-monitoring",
		MetricsAddr: "127.0.0.1:" + strconv.Itoa(opPort), Args: hookArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopComponent(op) })

	// Prometheus' identity: a ServiceAccount bound to the chart's own metrics-reader role.
	promToken, otherToken, err := scraperTokens(ctx, c, r)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile, err := writeFile(dir, "prometheus-token", []byte(promToken))
	if err != nil {
		t.Fatal(err)
	}
	schedTarget := "127.0.0.1:" + strconv.Itoa(sched.Port)
	// Without the binding the scheduler refuses the token: the 403 docs/runbooks.md names.
	if code, err := getStatus(ctx, "https://"+schedTarget+"/metrics", otherToken); err != nil || code != http.StatusForbidden {
		t.Errorf("scheduler /metrics with an unbound ServiceAccount's token: %d %v, want 403", code, err)
	}

	// Prometheus, from the rendered scrape settings and rules.
	watcherAddr := strings.TrimPrefix(st.Watcher.URL, "http://")
	opTarget := "127.0.0.1:" + strconv.Itoa(opPort)
	// The operator's metrics server starts beside its readiness endpoint, not before it: wait
	// for it to listen (a refused connection), then expect the 403.
	if err := framework.Poll(ctx, 30*time.Second, func() (bool, string) {
		code, err := getStatus(ctx, "https://"+opTarget+"/metrics", otherToken)
		return err == nil && code == http.StatusForbidden, fmt.Sprintf("%d %v", code, err)
	}); err != nil {
		t.Errorf("operator /metrics with an unbound ServiceAccount's token: %v, want 403", err)
	}
	targets := map[string][]string{schedulerJob: {schedTarget}, operatorJob: {opTarget}, watcherJob: {watcherAddr}}
	for _, n := range loads {
		targets[agentJob] = append(targets[agentJob], st.Agents[n.Name].Addr)
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: %s\nrule_files: [berth-rules.yaml]\nscrape_configs:\n", evalInterval)
	for _, job := range []string{schedulerJob, operatorJob, watcherJob, agentJob} {
		sc, err := scrapeJob(job, r.endpoints[job], targets[job], tokenFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg += sc
	}
	if _, err := writeFile(dir, "berth-rules.yaml", r.rules); err != nil {
		t.Fatal(err)
	}
	cfgPath, err := writeFile(dir, "prometheus.yml", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	prom := &framework.Prometheus{URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	pp, err := c.StartComponent(ctx, cluster.ProcessSpec{Name: "prometheus-monitoring", Binary: promBin, Args: []string{
		"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(port),
	}}, cluster.HTTPCheck(prom.URL+"/-/ready"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopComponent(pp) })

	// Every target up: the scheduler's through HTTPS, the token and the SubjectAccessReview.
	if err := framework.Poll(ctx, time.Minute, func() (bool, string) {
		res, err := prom.Query(ctx, `up`)
		if err != nil {
			return false, err.Error()
		}
		up := map[string]int{}
		for _, s := range res {
			if s.Value == 1 {
				up[s.Metric["job"]]++
			}
		}
		ok := up[schedulerJob] == 1 && up[operatorJob] == 1 && up[watcherJob] == 1 && up[agentJob] == len(loads)
		return ok, fmt.Sprintf("targets up per job: %v", up)
	}); err != nil {
		t.Fatalf("%v\nprometheus targets: %s\nprometheus log:\n%s", err, prom.Targets(ctx), pp.Tail(20))
	}

	// Pods for berth-scheduler while Prometheus scrapes it, so the attempt counters and
	// histograms move inside the dashboard's rate windows. Two, one after the other: the first
	// attempt creates the histogram's series, and a rate needs an increase Prometheus saw.
	const ns = "monitoring-e2e"
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"probe-1", "probe-2"} {
		if i > 0 {
			if err := framework.Poll(ctx, time.Minute, func() (bool, string) {
				res, err := prom.Query(ctx, `scheduler_scheduling_attempt_duration_seconds_count{job="`+schedulerJob+`"}`)
				return err == nil && len(res) > 0, fmt.Sprintf("%d series, %v", len(res), err)
			}); err != nil {
				t.Fatalf("Prometheus never scraped the first attempt: %v", err)
			}
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, framework.Pod(ns, name, map[string]string{"probe": name},
			framework.PodSpec(schedulerName, "100m", "64Mi")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := framework.WaitPods(ctx, c.Client, ns, "probe="+name, 1, time.Minute, framework.Bound); err != nil {
			t.Fatalf("%v\n%s", err, sched.Tail(20))
		}
	}

	// Classed pods through the webhook (dry run: admission runs, nothing is stored), spread
	// over a few scrapes so the admissions counter has an increase to rate.
	for i := 0; i < 4; i++ {
		classed := framework.Pod(ns, fmt.Sprintf("classed-%d", i), map[string]string{framework.ClassLabel: "gold"}, framework.PodSpec("", "", ""))
		if err := framework.Poll(ctx, 30*time.Second, func() (bool, string) {
			got, err := c.Client.CoreV1().Pods(ns).Create(ctx, classed, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			// Mutated: the webhook answered (not only the API server ignoring its failure).
			return err == nil && got.Spec.Affinity != nil, fmt.Sprintf("%v", err)
		}); err != nil {
			t.Fatalf("the isolation webhook does not mutate classed pods: %v\noperator log:\n%s", err, op.Tail(20))
		}
		time.Sleep(1500 * time.Millisecond)
	}

	t.Run("every dashboard panel query returns data", func(t *testing.T) {
		testDashboard(ctx, t, prom, r.dashboard)
	})

	t.Run("the watcher alert fires when the watcher is killed and resolves when it is back", func(t *testing.T) {
		const alert = "BerthLoadWatcherUnreachable"
		if state := prom.AlertState(ctx, alert); state != "" {
			t.Fatalf("%s is %s before the watcher stops", alert, state)
		}
		killed := time.Now()
		c.StopComponent(st.Watcher.Process)
		pending, firing, err := prom.WaitFiring(ctx, alert, time.Minute)
		if err != nil {
			t.Fatalf("%v\nscheduler log:\n%s", err, sched.Tail(20))
		}
		// From the expression turning true (pending) to firing: `for`, rounded up to the next
		// evaluation; the 200 ms polling blurs either end.
		active := firing.Sub(pending)
		if active < watcherFor-500*time.Millisecond || active > watcherFor+evalInterval+500*time.Millisecond {
			t.Errorf("%s went pending → firing in %s, want its for (%s) plus at most one evaluation (%s)", alert, active, watcherFor, evalInterval)
		}
		// And pending no earlier than the threshold allows (the last fetch was up to one 1 s
		// refresh before the kill), no later than threshold + one scheduler refresh + one
		// scrape + one evaluation (3 s), with as much again of slack for a busy 2-core machine.
		if d := pending.Sub(killed); d < watcherUnreachable-time.Second || d > watcherUnreachable+6*time.Second {
			t.Errorf("%s pending %s after the watcher stopped, want about %s", alert, d, watcherUnreachable)
		}
		t.Logf("%s: pending %s after the kill, firing %s later", alert, pending.Sub(killed).Round(100*time.Millisecond), active.Round(100*time.Millisecond))

		w, err := restartWatcher(ctx, c, st)
		if err != nil {
			t.Fatal(err)
		}
		st.Watcher = w
		back := time.Now()
		if err := framework.Poll(ctx, 30*time.Second, func() (bool, string) {
			s := prom.AlertState(ctx, alert)
			return s == "", "alert state " + s
		}); err != nil {
			t.Fatalf("%s did not resolve after the watcher came back: %v\nscheduler log:\n%s", alert, err, sched.Tail(20))
		}
		// One refresh, one scrape, one evaluation, plus slack for the 2-core machine.
		if d := time.Since(back); d > 10*time.Second {
			t.Errorf("%s resolved %s after the watcher came back, want within 10s", alert, d)
		}
	})

	t.Run("the no-leader alert is quiet while the scheduler leads", func(t *testing.T) {
		if err := framework.Poll(ctx, 30*time.Second, func() (bool, string) {
			res, err := prom.Query(ctx, `leader_election_master_status{job="`+schedulerJob+`"} == 1`)
			return err == nil && len(res) == 1, fmt.Sprintf("%d leaders, %v", len(res), err)
		}); err != nil {
			t.Fatalf("berth-scheduler does not report its leadership: %v", err)
		}
		if state := prom.AlertState(ctx, "BerthSchedulerNoLeader"); state != "" {
			t.Errorf("BerthSchedulerNoLeader is %s while the scheduler leads", state)
		}
	})

	t.Run("the stale-nodes alert fires when the agents stop", func(t *testing.T) {
		const alert = "BerthNodesLoadStale"
		// The restarted watcher first needs the agents' reports again.
		if err := framework.Poll(ctx, 30*time.Second, func() (bool, string) {
			s := prom.AlertState(ctx, alert)
			return s == "", "alert state " + s
		}); err != nil {
			t.Fatalf("%s with every agent reporting: %v", alert, err)
		}
		for _, a := range st.Agents {
			a.Stop(c)
		}
		st.Agents = nil
		stopped := time.Now()
		pending, firing, err := prom.WaitFiring(ctx, alert, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if active := firing.Sub(pending); active < staleFor-500*time.Millisecond || active > staleFor+evalInterval+500*time.Millisecond {
			t.Errorf("%s went pending → firing in %s, want its for (%s) plus at most one evaluation", alert, active, staleFor)
		}
		t.Logf("%s: firing %s after the agents stopped (staleAfter %s, for %s)", alert, firing.Sub(stopped).Round(100*time.Millisecond), staleAfter, staleFor)
	})

	t.Run("the no-leader alert fires when the scheduler stops", func(t *testing.T) {
		const alert = "BerthSchedulerNoLeader"
		c.StopComponent(sched.Process)
		stopped := time.Now()
		pending, firing, err := prom.WaitFiring(ctx, alert, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if active := firing.Sub(pending); active < noLeaderFor-500*time.Millisecond || active > noLeaderFor+evalInterval+500*time.Millisecond {
			t.Errorf("%s went pending → firing in %s, want its for (%s) plus at most one evaluation", alert, active, noLeaderFor)
		}
		t.Logf("%s: firing %s after the scheduler stopped (for %s)", alert, firing.Sub(stopped).Round(100*time.Millisecond), noLeaderFor)
	})
}

// testDashboard evaluates every panel target of the dashboard against Prometheus, with the
// dashboard's variables as Grafana would fill them for this Prometheus.
func testDashboard(ctx context.Context, t *testing.T, prom *framework.Prometheus, raw string) {
	var d struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	// The scheduler_job variable's own query, label_values(<selector>, job), as Grafana asks
	// it: it must offer the scheduler's job (else every scheduler panel shows nothing).
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`).FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: cannot read its query %q", v.Name, v.Definition)
			continue
		}
		res, err := prom.Query(ctx, "count by ("+m[2]+") ("+m[1]+")")
		var got []string
		for _, s := range res {
			got = append(got, s.Metric[m[2]])
		}
		if err != nil || v.Name == "scheduler_job" && !slices.Contains(got, schedulerJob) {
			t.Errorf("variable %s (%s) offers %v (%v), want %s among them", v.Name, v.Definition, got, err, schedulerJob)
		}
	}
	fill := strings.NewReplacer("$scheduler_job", schedulerJob, "$__rate_interval", "2m")
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			q := fill.Replace(tg.Expr)
			if strings.Contains(q, "$") {
				t.Errorf("panel %q: unknown variable left in %s", p.Title, q)
				continue
			}
			if why, skip := noDataReason(q); skip {
				// Still a valid query: Prometheus must accept it.
				if _, err := prom.Query(ctx, q); err != nil {
					t.Errorf("panel %q: %s: %v", p.Title, q, err)
				}
				t.Logf("panel %q: %s has no data here: %s", p.Title, q, why)
				continue
			}
			if err := framework.Poll(ctx, time.Minute, func() (bool, string) {
				res, err := prom.Query(ctx, q)
				if err != nil {
					return false, err.Error()
				}
				for _, s := range res {
					if !math.IsNaN(s.Value) {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d series, none with a number", len(res))
			}); err != nil {
				t.Errorf("panel %q: %s returns no data: %v", p.Title, q, err)
			}
		}
	}
}

func noDataReason(q string) (string, bool) {
	for m, why := range noData {
		if strings.Contains(q, m) {
			return why, true
		}
	}
	return "", false
}

// scraperTokens applies the chart's metrics-reader ClusterRole, binds it to Prometheus'
// ServiceAccount as docs/runbooks.md says, and returns that account's token and the token of
// an account it is not bound to.
func scraperTokens(ctx context.Context, c *cluster.Cluster, r *rendered) (prom, other string, err error) {
	var role rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.metricsReader.Object, &role); err != nil {
		return "", "", err
	}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", "", fmt.Errorf("applying the chart's %s: %w", role.Name, err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, promNamespace); err != nil {
		return "", "", err
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-berth-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: promNamespace, Name: promAccount}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", "", err
	}
	tokens := make([]string, 2)
	for i, sa := range []string{promAccount, otherAccount} {
		if _, err := c.Client.CoreV1().ServiceAccounts(promNamespace).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: promNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", "", err
		}
		exp := int64(3600)
		tr, err := c.Client.CoreV1().ServiceAccounts(promNamespace).CreateToken(ctx, sa,
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			return "", "", fmt.Errorf("token of %s/%s: %w", promNamespace, sa, err)
		}
		tokens[i] = tr.Status.Token
	}
	return tokens[0], tokens[1], nil
}

// restartWatcher starts the load watcher again on the address the scheduler, the agents and
// Prometheus know, with the flags stack.Start gave it.
func restartWatcher(ctx context.Context, c *cluster.Cluster, st *stack.Stack) (*stack.Watcher, error) {
	kc, err := stack.WatcherKubeconfig(ctx, c, st.Opts.Prefix+"berth-loadwatcher", st.Opts.Namespace)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--listen=" + strings.TrimPrefix(st.Watcher.URL, "http://"), "--kubeconfig=" + kc,
		"--source=agent", "--agent-service-account=" + st.Opts.Namespace + "/" + st.Opts.ServiceAccount}, st.Opts.WatcherArgs...)
	p, err := c.StartComponent(ctx, cluster.ProcessSpec{Name: st.Opts.Prefix + "berth-loadwatcher-again",
		Binary: filepath.Join(c.BinDir, "berth-loadwatcher"), Args: args}, cluster.HTTPCheck(st.Watcher.URL+"/readyz"))
	if err != nil {
		return nil, fmt.Errorf("restarting the load watcher: %w", err)
	}
	return &stack.Watcher{Process: p, URL: st.Watcher.URL}, nil
}

func stopStack(c *cluster.Cluster, st *stack.Stack) {
	for _, a := range st.Agents {
		a.Stop(c)
	}
	c.StopComponent(st.Watcher.Process)
}

// getStatus GETs url with a bearer token; the scheduler's certificate is self-signed.
func getStatus(ctx context.Context, u, token string) (int, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed loopback certificate
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// poll calls f every 200 ms until it says done or timeout passes; the error carries f's last
// explanation.

func keys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
