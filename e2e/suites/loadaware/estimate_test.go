package loadaware

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	configv1 "github.com/berth-sched/berth/api/config/v1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/agent/load/fixture"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/placedload"
)

// TestSlowStarterKeepsItsEstimate: two pods of 1 CPU, each pinned to its own node, both
// measured by their node's agent at almost nothing (a slow starter's first minutes). The one
// annotated berth.dev/estimate-seconds (honoured up to podEstimateSecondsLimit) still counts its
// whole estimate in what berth-scheduler adds to its node; the other counts what it uses. Read
// back from the running scheduler (/debug/berth/placed, what Score counts).
func TestSlowStarterKeepsItsEstimate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := shared
	const (
		slowNode, fastNode = "est-slow", "est-fast"
		sched              = "berth-loadaware-estimate"
		ns                 = "loadaware-estimate"
	)
	loads := []stack.NodeLoad{{Name: slowNode, CPU: 20, Memory: 40}, {Name: fastNode, CPU: 20, Memory: 40}}
	for _, n := range loads {
		if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n.Name, CPU: "8", Memory: "16Gi", Labels: map[string]string{"berth.io/e2e": "estimate"}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := stack.Start(ctx, c, stack.Options{Prefix: "est-", Nodes: loads})
	if err != nil {
		t.Fatal(err)
	}
	// The args are the configuration's last lines: these join them.
	config := stack.TLPConfig(sched, st.Watcher.URL, 40, 60, 1) + "      podEstimateSecondsLimit: 600\n"
	proc, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "berth-scheduler-estimate", Config: config})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := stack.SchedulerMetrics(ctx, c, proc.Port)
	if err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitFetched(ctx, metrics, "TargetLoadPacking", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	for name, node := range map[string]string{"slow": slowNode, "fast": fastNode} {
		p := guaranteedPod(ns, name, name, resource.MustParse("1"))
		p.Spec.SchedulerName = sched
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		if name == "slow" {
			p.Annotations = map[string]string{configv1.EstimateSecondsAnnotation: "600"}
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods, err := framework.WaitPods(ctx, c.Client, ns, "case="+name, 1, time.Minute, framework.Running)
		if err != nil {
			t.Fatal(err)
		}
		uids[node] = string(pods[0].UID)
		// The node's cgroups: its agent pod (using nothing, as Start made it) and this pod at
		// 0.1 % of the node.
		if err := st.Agents[node].Fixture.SetPods([]fixture.Pod{
			{UID: string(st.AgentPods[node].UID), QOS: "besteffort"},
			{UID: uids[node], CPU: 0.1, MemoryBytes: 8 << 20},
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Both pods measured: the watcher serves each one's use.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := stack.GetWatcher(ctx, st.Watcher.URL)
		if err != nil {
			return false, nil
		}
		for node, uid := range uids {
			if !slices.ContainsFunc(r.Nodes[node].Pods, func(p loadapi.PodUsage) bool { return p.UID == uid }) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the watcher never served both pods' measured use: %v", err)
	}
	client, err := framework.AdminLoopbackClient(c)
	if err != nil {
		t.Fatal(err)
	}
	// Once the scheduler has fetched a document with both pods measured, the fast one counts
	// what it uses (about 8m), the slow one its whole estimate (1000m, less the little its
	// node's window holds of it).
	var placed map[string]placedload.Load
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if placed, err = placedLoad(ctx, client, proc.Port); err != nil {
			return false, nil
		}
		return placed[fastNode].MilliCPU < 100, nil
	})
	if err != nil {
		t.Fatalf("the measured pod on %s still counts its estimate: %v (placed %v)", fastNode, err, placed)
	}
	if got := placed[slowNode].MilliCPU; got < 900 || got > 1000 {
		t.Errorf("%s: the annotated slow starter adds %dm, want about its estimate of 1000m (placed %v)", slowNode, got, placed)
	}
	t.Logf("placed load the scheduler counts: %v", placed)
}

// placedLoad is the first load-aware plugin's placed load per node, from the scheduler.
func placedLoad(ctx context.Context, client *http.Client, port int) (map[string]placedload.Load, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(port)+placedload.Path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", placedload.Path, resp.Status)
	}
	var a placedload.Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return nil, err
	}
	if len(a.Profiles) == 0 {
		return nil, fmt.Errorf("no load-aware profile in %s", placedload.Path)
	}
	return a.Profiles[0].Nodes, nil
}
