package berthctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/berth-sched/berth/pkg/berthctl/reach"
	"github.com/berth-sched/berth/pkg/placedload"
)

// PlacedLoad is what one load-aware plugin of one scheduler profile adds to the node for pods
// it placed that the node's report does not include yet, as the running leader serves it.
type PlacedLoad struct {
	Profile     string `json:"profile"`
	Plugin      string `json:"plugin"`
	MilliCPU    int64  `json:"milliCPU"`
	MemoryBytes int64  `json:"memoryBytes"`
	// Pods placed pods make the load, FromProfile of them at their workload's profile,
	// FromNamespace at their namespace's ratio.
	Pods          int `json:"pods,omitempty"`
	FromProfile   int `json:"fromProfile,omitempty"`
	FromNamespace int `json:"fromNamespace,omitempty"`
}

// ReadPlaced asks the scheduler at base (with hc) for placedload.Path.
func ReadPlaced(ctx context.Context, hc *http.Client, base, who string) (*placedload.Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+placedload.Path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", who, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("%s refused (%d): your credentials need get on the non-resource URL %s (the chart's berthctl-reader ClusterRole grants it)", who, resp.StatusCode, placedload.Path)
	default:
		return nil, fmt.Errorf("%s answered %d: %s", who, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var ans placedload.Answer
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("%s: not a berth-scheduler answer at %s: %v", who, placedload.Path, err)
	}
	return &ans, nil
}

// AddPlaced joins the scheduler's answer into view per node, and says where it came from; an
// answer that could not be read leaves the nodes alone and says why (the estimate is an
// optional part of the view: the command still shows what it measured).
func AddPlaced(view *NodesView, ans *placedload.Answer, who string, err error) {
	if err != nil {
		view.PlacedPodEstimate = "not read: " + err.Error()
		return
	}
	view.PlacedPodEstimate = "read from " + who + " (" + placedload.Path + "), per profile and plugin; -o wide shows the largest"
	for i := range view.Nodes {
		n := &view.Nodes[i]
		n.Placed = nil
		for _, p := range ans.Profiles {
			if l, ok := p.Nodes[n.Name]; ok {
				n.Placed = append(n.Placed, PlacedLoad{Profile: p.Profile, Plugin: p.Plugin, MilliCPU: l.MilliCPU, MemoryBytes: l.MemoryBytes,
					Pods: l.Pods, FromProfile: l.FromProfile, FromNamespace: l.FromNamespace})
			}
		}
		sort.Slice(n.Placed, func(a, b int) bool {
			if n.Placed[a].Profile != n.Placed[b].Profile {
				return n.Placed[a].Profile < n.Placed[b].Profile
			}
			return n.Placed[a].Plugin < n.Placed[b].Plugin
		})
	}
}

// placedCell is the wide table's cell: the largest CPU any plugin adds (the plugins estimate
// the same pods each by its own rule), and when the scheduler said so, how many pods that is
// and how many of them count at their workload's profile and at their namespace's ratio
// ("+450m 3p/1wl/1ns").
func placedCell(ps []PlacedLoad) string {
	if len(ps) == 0 {
		return "-"
	}
	top := ps[0]
	for _, p := range ps[1:] {
		if p.MilliCPU > top.MilliCPU {
			top = p
		}
	}
	if top.Pods == 0 {
		return fmt.Sprintf("+%dm", top.MilliCPU)
	}
	return fmt.Sprintf("+%dm %dp/%dwl/%dns", top.MilliCPU, top.Pods, top.FromProfile, top.FromNamespace)
}

// readPlaced reaches the leader scheduler as explain does and reads its placed load.
func (o Options) readPlaced(ctx context.Context, kube *reach.Kube) (*placedload.Answer, string, error) {
	namespaces := []string{"berth-system", "kube-system"}
	if o.SchedulerNamespace != "" {
		namespaces = []string{o.SchedulerNamespace}
	}
	s := reach.Scheduler{Namespaces: namespaces, Lease: o.Lease, Port: o.SchedulerPort, Insecure: true, Timeout: o.Timeout}
	base, who, hc, stop, err := s.Open(ctx, kube.Config, kube.Client)
	if err != nil {
		return nil, "", err
	}
	defer stop()
	ans, err := ReadPlaced(ctx, hc, base, who)
	return ans, who, err
}
