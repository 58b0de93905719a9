package loadaware

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/loadwatcher"
)

// TestAgentIdentity posts reports to a real berth-loadwatcher whose TokenReviews go to the real
// API server, with tokens minted by the TokenRequest API and bound to (KWOK-run) pods: only a
// token of the agent account bound to a pod on the reported node is accepted.
func TestAgentIdentity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := shared
	const (
		ns      = "berth-identity"
		agentSA = "berth-agent"
		otherSA = "not-an-agent"
		nodeA   = "id-node-a"
		nodeB   = "id-node-b"
	)
	if err := c.AddNodes(ctx, cluster.NodeSpec{Name: nodeA, CPU: "8", Memory: "16Gi"}, cluster.NodeSpec{Name: nodeB, CPU: "8", Memory: "16Gi"}); err != nil {
		t.Fatal(err)
	}
	if err := stack.EnsureAgentIdentity(ctx, c, ns, agentSA); err != nil {
		t.Fatal(err)
	}
	if err := stack.EnsureServiceAccount(ctx, c, ns, otherSA); err != nil {
		t.Fatal(err)
	}
	kc, err := stack.WatcherKubeconfig(ctx, c, "identity-loadwatcher", ns)
	if err != nil {
		t.Fatal(err)
	}
	// --token-cache-ttl=0: every POST is a real TokenReview, so each case is judged on its own.
	w, err := stack.StartWatcher(ctx, c, "identity-loadwatcher", kc,
		"--source=agent", "--agent-service-account="+ns+"/"+agentSA, "--token-cache-ttl=0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopComponent(w.Process) })

	podA, err := stack.AgentPod(ctx, c, ns, agentSA, "agent-a", nodeA)
	if err != nil {
		t.Fatal(err)
	}
	podB, err := stack.AgentPod(ctx, c, ns, agentSA, "agent-b", nodeB)
	if err != nil {
		t.Fatal(err)
	}
	podOther, err := stack.AgentPod(ctx, c, ns, otherSA, "impostor-a", nodeA)
	if err != nil {
		t.Fatal(err)
	}
	podGone, err := stack.AgentPod(ctx, c, ns, agentSA, "agent-gone", nodeA)
	if err != nil {
		t.Fatal(err)
	}
	mint := func(sa string, pod *corev1.Pod) string {
		t.Helper()
		tok, err := stack.MintToken(ctx, c, sa, pod)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tokA, tokB, tokOther, tokGone := mint(agentSA, podA), mint(agentSA, podB), mint(otherSA, podOther), mint(agentSA, podGone)
	// A token outlives nothing it is bound to: deleting the pod invalidates it at TokenReview.
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, podGone.Name, deleteNow); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, podGone.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("pod %s not deleted: %v", podGone.Name, err)
	}

	cases := []struct {
		name       string
		token      string
		node       string
		wantStatus int
		wantReason string // rejection counter label; "" when accepted
	}{
		{"agent token bound to a pod on the node", tokA, nodeA, http.StatusNoContent, ""},
		{"agent token bound to a pod on another node", tokB, nodeA, http.StatusForbidden, loadwatcher.ReasonWrongNode},
		{"token of another service account on the node", tokOther, nodeA, http.StatusForbidden, loadwatcher.ReasonWrongSA},
		{"garbage token", "not.a.jwt", nodeA, http.StatusUnauthorized, loadwatcher.ReasonInvalidToken},
		{"token bound to a deleted pod", tokGone, nodeA, http.StatusUnauthorized, loadwatcher.ReasonInvalidToken},
		{"no token", "", nodeA, http.StatusUnauthorized, loadwatcher.ReasonNoToken},
		{"the other agent for its own node", tokB, nodeB, http.StatusNoContent, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := postReport(ctx, t, w.URL, tc.token, report(tc.node, 30, 40))
			if status != tc.wantStatus {
				t.Fatalf("POST report for %s: %d %s, want %d", tc.node, status, body, tc.wantStatus)
			}
			if tc.wantReason == "" {
				return
			}
			_, page, err := getText(ctx, http.DefaultClient, w.URL+"/metrics")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := metricLine(page, `berth_loadwatcher_reports_rejected_total{reason="`+tc.wantReason+`"}`); !ok {
				t.Errorf("no rejection counted with reason %q", tc.wantReason)
			}
		})
	}

	// Only the accepted reports reached the store: both nodes at the reported 30 %.
	r, err := stack.GetWatcher(ctx, w.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{nodeA, nodeB} {
		if cpu, ok := stack.CPU(r, n); !ok || cpu != 30 {
			t.Errorf("/watcher: node %s CPU %v (present %v), want 30 from the accepted report", n, cpu, ok)
		}
	}
}

// report is a well-formed agent report for node at cpu/mem percent, sampled now.
func report(node string, cpu, mem float64) loadapi.Report {
	r := loadapi.Report{Node: node, Time: time.Now().Unix(), Latest: loadapi.Latest{CPU: cpu, Memory: mem}}
	for _, win := range loadapi.WindowNames {
		r.Windows = append(r.Windows, loadapi.WindowReport{Window: win, Samples: 10,
			CPU:    loadapi.ResourceStats{Avg: cpu, P95: cpu},
			Memory: loadapi.ResourceStats{Avg: mem, P95: mem}})
	}
	return r
}

func postReport(ctx context.Context, t *testing.T, url, token string, r loadapi.Report) (int, string) {
	t.Helper()
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+loadapi.ReportPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
