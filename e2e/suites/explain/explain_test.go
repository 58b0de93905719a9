// Package explain reads berth-scheduler's decision records back from the running scheduler on
// the local cluster: seed 001's TargetLoadPacking scores (77.5 / 33.3 / 55 for an empty pod)
// with the utilisation the plugin read, the Scheduled event's summary, a pod that fits nowhere,
// `kubectl berth explain` (the built plugin binary, leader found from the real Lease), and the
// clear answers for a pod never seen, a pod of another scheduler, a record evicted from the
// LRU, a scheduler restart and an unauthenticated caller. One cluster; the real berth-agent,
// berth-loadwatcher and berth-scheduler binaries as processes.
package explain

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/decisionapi"
)

func TestMain(m *testing.M) { framework.RunIsolated(m) }

const (
	schedName = "berth-explain-e2e"
	ns        = "explain-e2e"
	// records is small so the eviction case needs a handful of pods.
	records = 4
)

func TestExplain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{WithoutDefaultScheduler: true, WithoutBerthCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	loads := []stack.NodeLoad{{Name: "explain-25", CPU: 25, Memory: 40}, {Name: "explain-50", CPU: 50, Memory: 40}, {Name: "explain-10", CPU: 10, Memory: 40}}
	for _, n := range loads {
		if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: "8", Memory: "16Gi", Pods: 110,
			Labels: map[string]string{"berth.io/e2e": "explain"}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := stack.Start(ctx, c, stack.Options{Prefix: "explain-", Nodes: loads, WatcherArgs: []string{"--stale-after=5m"}})
	if err != nil {
		t.Fatal(err)
	}
	// Leader election on the Lease the chart's RBAC grants (kube-system/berth-scheduler), so
	// kubectl berth finds the leader the way it does on a real cluster.
	base := strings.Replace(stack.TLPConfig(schedName, st.Watcher.URL, 40, 300, 1), "leaderElection:\n  leaderElect: false",
		"leaderElection:\n  leaderElect: true\n  resourceName: berth-scheduler\n  resourceNamespace: kube-system", 1)
	cfg, err := framework.WithDecisionRecord(base, map[string]any{"records": records, "topNodes": 5, "summary": "Event"})
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*cluster.SchedulerProcess, *framework.ExplainClient) {
		t.Helper()
		sched, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-explain-e2e", Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		metrics, err := stack.SchedulerMetrics(ctx, c, sched.Port)
		if err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return stack.Fetches(metrics(), "TargetLoadPacking", "success") > 0, nil
		}); err != nil {
			t.Fatalf("berth-scheduler never fetched the load watcher: %v\n%s", err, sched.Tail(20))
		}
		ec, err := framework.NewExplainClient(c, sched.Port)
		if err != nil {
			t.Fatal(err)
		}
		return sched, ec
	}
	sched, ec := start()
	names := []string{"explain-25", "explain-50", "explain-10"}
	if _, err := stack.WaitFresh(ctx, st.Watcher.URL, names, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	kubectlBerth := func(args ...string) (string, string, int) {
		cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl-berth"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl-berth: %v", err)
		}
		return out.String(), errb.String(), code
	}
	direct := func() []string {
		return []string{"--scheduler-url", "https://127.0.0.1:" + strconv.Itoa(sched.Port), "--insecure-skip-tls-verify"}
	}

	t.Run("seed 001 scores and the utilisation read back from the running scheduler", func(t *testing.T) {
		// An empty pod: a cpu limit of 0 makes TargetLoadPacking predict 0 m, as in the seed.
		p := createPod(ctx, t, c, pod("empty", "0"))
		rec, err := ec.WaitRecord(ctx, ns, "empty", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("record: chosen %s, nodes %+v", rec.Chosen, rec.Nodes)
		// Seed 001, target 40 %: 25 % → 77.5, 50 % → 33.3, 10 % → 55; the plugin rounds half up.
		want := map[string]struct {
			score int64
			util  float64
		}{"explain-25": {78, 25}, "explain-50": {33, 50}, "explain-10": {55, 10}}
		for _, n := range rec.Nodes {
			w, ok := want[n.Node]
			if !ok {
				t.Errorf("unexpected node %s", n.Node)
				continue
			}
			s, ok := n.Score("TargetLoadPacking")
			d, dok := n.Load("TargetLoadPacking")
			if !ok || !dok {
				t.Errorf("%s: score %v detail %v", n.Node, ok, dok)
				continue
			}
			if s.Raw != w.score || s.Normalized != w.score || s.Weight != 1 || n.Total != w.score {
				t.Errorf("%s: TargetLoadPacking %+v total %d, seed 001 says %d", n.Node, s, n.Total, w.score)
			}
			// What the plugin read: the agent's sample as the watcher served it, fresh, and
			// nothing placed since (the first pod).
			if d.MeasuredPercent != w.util || d.PredictedPercent != w.util || d.CapacityMilliCPU != 8000 || d.PodMilliCPU != 0 ||
				d.Freshness != "fresh" || d.Source == "" || d.AgeSeconds < 0 || d.AgeSeconds > 300 || d.UnreportedMilliCPU != 0 || d.TargetPercent != 40 {
				t.Errorf("%s: detail %+v", n.Node, d)
			}
			delete(want, n.Node)
		}
		if len(want) > 0 {
			t.Errorf("nodes missing from the record: %v", want)
		}
		if rec.Chosen != "explain-25" || rec.Outcome != decisionapi.OutcomeScheduled || !rec.Nodes[0].Chosen || rec.UID != string(p.UID) {
			t.Errorf("chosen %q outcome %s uid %s; want explain-25 Scheduled %s", rec.Chosen, rec.Outcome, rec.UID, p.UID)
		}
		ev, err := framework.WaitSchedulingEvent(ctx, c.Client, p, "Scheduled", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if wantNote := "Successfully assigned explain-e2e/empty to explain-25; TargetLoadPacking 78 (util 25 %→25 %), total 78; next best explain-10 55"; ev.Note != wantNote {
			t.Errorf("Scheduled event %q\nwant            %q", ev.Note, wantNote)
		}
	})

	t.Run("a pod that fits nowhere shows each node's filter reason", func(t *testing.T) {
		createPod(ctx, t, c, pod("huge", "100"))
		var rec decisionapi.Record
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			r, nf, err := ec.Get(ctx, ns, "huge")
			rec = r
			return err == nil && nf == nil && rec.Outcome == decisionapi.OutcomeUnschedulable, nil
		}); err != nil {
			t.Fatalf("no Unschedulable record for huge: %v (%+v)", err, rec)
		}
		refused := map[string]string{}
		for _, n := range rec.Nodes {
			if n.Filter != nil {
				refused[n.Node] = n.Filter.Plugin + ": " + strings.Join(n.Filter.Reasons, "; ")
			}
		}
		t.Logf("refusals: %v", refused)
		for _, node := range names {
			if r := refused[node]; !strings.Contains(r, "NodeResourcesFit") || !strings.Contains(r, "Insufficient cpu") {
				t.Errorf("%s: refusal %q, want NodeResourcesFit: Insufficient cpu", node, r)
			}
		}
		if rec.Refused != 3 || rec.Feasible != 0 || len(rec.RefusedBy) == 0 || rec.RefusedBy[0].Nodes != 3 {
			t.Errorf("counts: refused %d feasible %d refusedBy %+v", rec.Refused, rec.Feasible, rec.RefusedBy)
		}
		out, errs, code := kubectlBerth(append([]string{"explain", "pod", "huge", "-n", ns}, direct()...)...)
		if code != 0 || !strings.Contains(out, "Unschedulable") || !strings.Contains(out, "refused by NodeResourcesFit on 3 node(s): Insufficient cpu") {
			t.Errorf("kubectl berth (%d): %s %s", code, out, errs)
		}
	})

	t.Run("kubectl berth explain prints the table", func(t *testing.T) {
		out, errs, code := kubectlBerth(append([]string{"explain", "pod", "empty", "-n", ns}, direct()...)...)
		t.Logf("kubectl berth explain pod empty:\n%s", out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		rows := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			// Table rows start in column 0; the inputs below are indented.
			if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(l, " ") {
				rows[f[0]] = strings.Join(f, " ")
			}
		}
		for node, want := range map[string]string{
			"NODE":       "NODE FILTER TargetLoadPacking(×1) TOTAL CHOSEN",
			"explain-25": "explain-25 passed 78 78 *",
			"explain-10": "explain-10 passed 55 55",
			"explain-50": "explain-50 passed 33 33",
		} {
			if rows[node] != want {
				t.Errorf("row %q, want %q", rows[node], want)
			}
		}
		if !strings.Contains(out, "Scheduled on explain-25") || !strings.Contains(out, "explain-25 TargetLoadPacking: measured 25 % of 8000m; + pod 0m + unreported 0m → 25 % (target 40 %)") {
			t.Errorf("header or inputs missing:\n%s", out)
		}
		js, _, code := kubectlBerth(append([]string{"explain", "pod/empty", "-n", ns, "-o", "json"}, direct()...)...)
		var rec decisionapi.Record
		if code != 0 || json.Unmarshal([]byte(js), &rec) != nil || rec.Chosen != "explain-25" {
			t.Errorf("-o json (%d): %s", code, js)
		}
		// Without --scheduler-url it follows the real Lease: this scheduler is a process, so
		// it says so instead of asking some other scheduler.
		_, errs, code = kubectlBerth("explain", "pod", "empty", "-n", ns)
		if code != 1 || !strings.Contains(errs, "of Lease kube-system/berth-scheduler is not a pod in kube-system") {
			t.Errorf("leader lookup (%d): %s", code, errs)
		}
	})

	notFound := func(t *testing.T, name, reason, contains string) {
		t.Helper()
		_, nf, err := ec.Get(ctx, ns, name)
		if err != nil || nf == nil || nf.Reason != reason || !strings.Contains(nf.Error, contains) {
			t.Errorf("%s: %v %+v, want %s containing %q", name, err, nf, reason, contains)
		}
		_, errs, code := kubectlBerth(append([]string{"explain", "pod", name, "-n", ns}, direct()...)...)
		if code != 1 || !strings.Contains(errs, "has no decision record ("+reason+")") {
			t.Errorf("kubectl berth %s (%d): %s", name, code, errs)
		}
	}

	t.Run("a pod never seen and a pod of another scheduler get clear answers", func(t *testing.T) {
		notFound(t, "never-created", decisionapi.ReasonNeverSeen, "does not exist")
		other := pod("other", "100m")
		other.Spec.SchedulerName = "someone-else"
		createPod(ctx, t, c, other)
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, nf, err := ec.Get(ctx, ns, "other")
			return err == nil && nf != nil && nf.Reason == decisionapi.ReasonOtherScheduler, nil
		}); err != nil {
			t.Errorf("the scheduler never saw pod other in its informer: %v", err)
		}
		notFound(t, "other", decisionapi.ReasonOtherScheduler, `scheduled by "someone-else"`)
	})

	t.Run("a record pushed out of the LRU is reported as evicted", func(t *testing.T) {
		for i := 0; i < records; i++ {
			name := fmt.Sprintf("fill-%d", i)
			createPod(ctx, t, c, pod(name, "100m"))
			if _, err := ec.WaitRecord(ctx, ns, name, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		notFound(t, "empty", decisionapi.ReasonEvicted, "evicted")
	})

	t.Run("after a restart the scheduler says it never scheduled the pod", func(t *testing.T) {
		last := fmt.Sprintf("fill-%d", records-1)
		if _, err := framework.WaitPods(ctx, c.Client, ns, "case="+last, 1, time.Minute, framework.Running); err != nil {
			t.Fatal(err)
		}
		sched.Stop(10 * time.Second)
		sched, ec = start()
		notFound(t, last, decisionapi.ReasonBeforeStart, "never scheduled it")
	})

	t.Run("an unauthenticated request is refused", func(t *testing.T) {
		anon := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed loopback
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ec.Base+"?namespace="+ns+"&name=huge", nil)
		resp, err := anon.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			t.Errorf("anonymous request answered %d: %s", resp.StatusCode, body)
		}
		if strings.Contains(string(body), "explain-25") || strings.Contains(string(body), "Insufficient") {
			t.Errorf("anonymous request got a record: %s", body)
		}
	})
}

func pod(name, cpu string) *corev1.Pod {
	spec := framework.PodSpec(schedName, cpu, "64Mi")
	for i := range spec.Containers {
		spec.Containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	}
	spec.NodeSelector = map[string]string{"berth.io/e2e": "explain"}
	return framework.Pod(ns, name, map[string]string{"case": name}, spec)
}

func createPod(ctx context.Context, t *testing.T, c *cluster.Cluster, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
