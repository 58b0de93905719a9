package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/decisionapi"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/berth-sched/berth/pkg/placedload"
)

// placedProbe reads what the scheduler's load-aware plugins add to nodes for placed pods their
// window does not hold yet (/debug/berth/placed): with -v each wave logs it, so a run shows
// whether the estimates of one wave are gone by the next (the agents measured the pods) or
// still inflate the nodes the next wave is scored on.
type placedProbe struct {
	client  *http.Client
	url     string
	explain string
	watcher string
	// watcherClient shows the watcher the reader token stack.StartWatcher registered.
	watcherClient *http.Client
}

func newPlacedProbe(c *cluster.Cluster, port int, watcherURL string) (*placedProbe, error) {
	client, err := framework.AdminLoopbackClient(c)
	if err != nil {
		return nil, err
	}
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	return &placedProbe{client: client, url: base + placedload.Path, explain: base + decisionapi.Path,
		watcher: watcherURL + "/watcher?pods=true", watcherClient: stack.ReaderClient(watcherURL)}, nil
}

// reported counts the pods the watcher lists on nodes and those with measured use.
func (p *placedProbe) reported(ctx context.Context) string {
	var doc loadapi.Response
	if err := getJSON(ctx, p.watcherClient, p.watcher, &doc); err != nil {
		return err.Error()
	}
	listed, measured := 0, 0
	for _, n := range doc.Nodes {
		listed += len(n.PodUIDs)
		measured += len(n.Pods)
	}
	return fmt.Sprintf("the watcher lists %d pods on nodes, %d with measured use", listed, measured)
}

// summary is the first plugin's added CPU over all nodes, and on how many nodes.
func (p *placedProbe) summary(ctx context.Context) string {
	var a placedload.Answer
	if err := getJSON(ctx, p.client, p.url, &a); err != nil {
		return err.Error()
	}
	if len(a.Profiles) == 0 {
		return "no load-aware plugin"
	}
	var milli int64
	nodes := 0
	for _, l := range a.Profiles[0].Nodes {
		if l.MilliCPU > 0 {
			milli += l.MilliCPU
			nodes++
		}
	}
	return fmt.Sprintf("%s adds %.2f cores for placed pods on %d nodes; %s", a.Profiles[0].Plugin, float64(milli)/1000, nodes, p.reported(ctx))
}

// node is what the first plugin adds to node for placed pods, in percent of milliCPU.
func (p *placedProbe) node(ctx context.Context, node string, milliCPU int64) string {
	var a placedload.Answer
	if err := getJSON(ctx, p.client, p.url, &a); err != nil {
		return "placed load unread: " + err.Error()
	}
	if len(a.Profiles) == 0 || milliCPU <= 0 {
		return "no load-aware plugin"
	}
	l := a.Profiles[0].Nodes[node]
	return fmt.Sprintf("%s added %.1f %% for placed pods", a.Profiles[0].Plugin, 100*float64(l.MilliCPU)/float64(milliCPU))
}

// placements says, for each pod, how the scheduler saw the node it chose when it placed the pod
// (its decision record: TargetLoadPacking's predicted utilisation there) and the best other
// feasible node: whether a hot node was filled on a low prediction or was the least bad choice.
func (p *placedProbe) placements(ctx context.Context, ns string, pods []string) string {
	var parts []string
	for _, name := range pods {
		var rec decisionapi.Record
		if err := getJSON(ctx, p.client, p.explain+"?namespace="+ns+"&name="+name, &rec); err != nil || rec.Chosen == "" {
			parts = append(parts, name+": no record")
			continue
		}
		chosen, other := -1.0, -1.0
		for _, n := range rec.Nodes {
			pred, ok := predicted(n)
			switch {
			case !ok || !n.Feasible:
			case n.Chosen:
				chosen = pred
			case other < 0 || pred < other:
				other = pred
			}
		}
		parts = append(parts, fmt.Sprintf("%s at %s: %.0f %% (coolest other of the top %d: %.0f %%, %d feasible)",
			name, rec.Started.Format("15:04:05"), chosen, len(rec.Nodes), other, rec.Feasible))
	}
	return strings.Join(parts, "; ")
}

// predicted is TargetLoadPacking's predicted utilisation in a node's record.
func predicted(n decisionapi.NodeRecord) (float64, bool) {
	d, ok := n.Load("TargetLoadPacking")
	if !ok || d.Neutral {
		return 0, false
	}
	return d.PredictedPercent, true
}

func getJSON(ctx context.Context, c *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}
