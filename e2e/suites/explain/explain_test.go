// Package explain reads berth-scheduler's decision records back from its secure port on the
// local cluster: seed 001's TargetLoadPacking scores (77.5 / 33.3 / 55 for an empty pod), a pod
// that fits nowhere, an unknown pod and an unauthenticated caller. One cluster; the real
// berth-agent, berth-loadwatcher and berth-scheduler binaries as processes.
package explain

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
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
	"github.com/berth-sched/berth/e2e/suites/loadaware/stack"
	"github.com/berth-sched/berth/pkg/explain"
)

func TestMain(m *testing.M) { framework.RunIsolated(m) }

const schedName = "berth-explain-e2e"

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
	cfg, err := framework.WithDecisionRecord(stack.TLPConfig(schedName, st.Watcher.URL, 40, 300, 1),
		map[string]any{"records": 100, "topNodes": 5, "summary": "Event"})
	if err != nil {
		t.Fatal(err)
	}
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
	names := []string{"explain-25", "explain-50", "explain-10"}
	if _, err := stack.WaitFresh(ctx, st.Watcher.URL, names, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	admin := adminClient(t, c)
	base := "https://127.0.0.1:" + strconv.Itoa(sched.Port) + explain.Path
	const ns = "explain-e2e"
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}

	t.Run("seed 001 scores read back from the running scheduler", func(t *testing.T) {
		// An empty pod: a cpu limit of 0 makes TargetLoadPacking predict 0 m, as in the seed.
		p := pod(ns, "empty", "0")
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := framework.WaitPods(ctx, c.Client, ns, "case=empty", 1, time.Minute, framework.Running); err != nil {
			t.Fatal(err)
		}
		rec := getRecord(ctx, t, admin, base, ns, "empty")
		t.Logf("record: chosen %s, nodes %+v", rec.Chosen, rec.Nodes)
		// Seed 001, target 40 %: 25 % → 77.5, 50 % → 33.3, 10 % → 55; the plugin rounds.
		want := map[string][]int64{"explain-25": {77, 78}, "explain-50": {33}, "explain-10": {55}}
		got := map[string]int64{}
		for _, n := range rec.Nodes {
			for _, s := range n.Scores {
				if s.Plugin == "TargetLoadPacking" {
					got[n.Node] = s.Raw
				}
			}
		}
		for node, ok := range want {
			if v, seen := got[node]; !seen || !(v == ok[0] || (len(ok) > 1 && v == ok[1])) {
				t.Errorf("%s: TargetLoadPacking raw %d (seen %v), seed 001 says %v", node, v, seen, ok)
			}
		}
		if rec.Chosen != "explain-25" || rec.Outcome != explain.OutcomeScheduled || rec.Weights["TargetLoadPacking"] != 1 {
			t.Errorf("chosen %q outcome %s weights %v; want explain-25 Scheduled", rec.Chosen, rec.Outcome, rec.Weights)
		}
	})

	t.Run("a pod that fits nowhere shows each node's filter reason", func(t *testing.T) {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod(ns, "huge", "100"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var rec explain.Record
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			code, body, err := get(ctx, admin, base+"?namespace="+ns+"&name=huge")
			if err != nil || code != http.StatusOK {
				return false, nil
			}
			return json.Unmarshal([]byte(body), &rec) == nil && rec.Outcome == explain.OutcomeUnschedulable, nil
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
	})

	t.Run("an unknown pod gets a clear message", func(t *testing.T) {
		code, body, err := get(ctx, admin, base+"?namespace="+ns+"&name=never-created")
		if err != nil {
			t.Fatal(err)
		}
		var nf explain.NotFound
		if code != http.StatusNotFound || json.Unmarshal([]byte(body), &nf) != nil || nf.Reason != explain.ReasonNeverSeen || !strings.Contains(nf.Error, "does not exist") {
			t.Errorf("%d %s", code, body)
		}
	})

	t.Run("an unauthenticated request is refused", func(t *testing.T) {
		anon := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed loopback
		code, body, err := get(ctx, anon, base+"?namespace="+ns+"&name=empty")
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("anonymous request answered %d: %s", code, body)
		}
		if strings.Contains(body, "explain-25") {
			t.Errorf("anonymous request got the record: %s", body)
		}
	})
}

func pod(ns, name, cpu string) *corev1.Pod {
	spec := framework.PodSpec(schedName, cpu, "64Mi")
	for i := range spec.Containers {
		spec.Containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	}
	spec.NodeSelector = map[string]string{"berth.io/e2e": "explain"}
	return framework.Pod(ns, name, map[string]string{"case": name}, spec)
}

func adminClient(t *testing.T, c *cluster.Cluster) *http.Client {
	t.Helper()
	cert, key, err := c.PKI.ClientCert(cluster.AdminIdentity)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates:       []tls.Certificate{pair},
		InsecureSkipVerify: true, //nolint:gosec // the scheduler's self-signed loopback certificate
	}}}
}

func get(ctx context.Context, client *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func getRecord(ctx context.Context, t *testing.T, client *http.Client, base, ns, name string) explain.Record {
	t.Helper()
	code, body, err := get(ctx, client, base+"?namespace="+ns+"&name="+name)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET record %s/%s: %d %v %s", ns, name, code, err, body)
	}
	var rec explain.Record
	if err := json.Unmarshal([]byte(body), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}
