package demo

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/decisionapi"
)

// startRecording starts a scenario's scheduler (name) on c with decision records on in every
// profile of config, so the scenario prints the scores the running scheduler used, and a
// client reading them. The caller stops the scheduler.
func startRecording(ctx context.Context, env *Env, c *cluster.Cluster, name, config string) (*cluster.SchedulerProcess, *framework.ExplainClient, error) {
	if env.Tamper != nil {
		config = env.Tamper(name, config)
	}
	cfg, err := framework.WithDecisionRecord(config, nil)
	if err != nil {
		return nil, nil, err
	}
	sched, err := c.StartScheduler(ctx, cluster.SchedulerOptions{Name: name, Config: cfg})
	if err != nil {
		return nil, nil, err
	}
	ec, err := framework.NewExplainClient(c, sched.Port)
	if err != nil {
		c.StopComponent(sched.Process)
		return nil, nil, err
	}
	return sched, ec, nil
}

// printDecision waits for the running scheduler's decision record of ns/name (read from its
// /debug/berth/explain, as kubectl berth explain does) and prints, per node, the score of
// each of plugins (all Score plugins when none are named) with the inputs the plugin
// reported, the total, and the filter verdict of refused nodes.
func printDecision(ctx context.Context, env *Env, ec *framework.ExplainClient, ns, name string, plugins ...string) (decisionapi.Record, error) {
	rec, err := ec.WaitRecord(ctx, ns, name, time.Minute)
	if err != nil {
		return rec, err
	}
	if len(plugins) == 0 {
		plugins = rec.ScorePlugins()
	}
	verdict := rec.Outcome
	if rec.Chosen != "" {
		verdict += " on " + rec.Chosen
	}
	fmt.Fprintf(env.Out, "%s/%s — the scheduler's decision record (profile %s, attempt %d): %s\n", ns, name, rec.Profile, rec.Attempts, verdict)
	if rec.PreFilter != nil {
		// Refused before any node was looked at: there is no per-node table.
		fmt.Fprintf(env.Out, "  refused by %s for every node: %s\n", rec.PreFilter.Plugin, strings.Join(rec.PreFilter.Reasons, "; "))
		return rec, nil
	}
	// Refusals shared by many nodes (the other scenarios' nodes, outside this pod's selector)
	// are one line each below the table; the rest are listed per node.
	common := map[string]bool{}
	for _, r := range rec.RefusedBy {
		if r.Nodes > 2 {
			common[r.Plugin+": "+r.Reason] = true
		}
	}
	if err := printDecisionTable(env, rec, plugins, common); err != nil {
		return rec, err
	}
	for _, r := range rec.RefusedBy {
		if common[r.Plugin+": "+r.Reason] {
			fmt.Fprintf(env.Out, "  %d nodes refused by %s: %s\n", r.Nodes, r.Plugin, r.Reason)
		}
	}
	if rec.OmittedFeasible > 0 {
		fmt.Fprintf(env.Out, "  (%d more feasible nodes not listed)\n", rec.OmittedFeasible)
	}
	return rec, nil
}

// printDecisionTable prints one row per node of rec: each of plugins' score, the total and
// whether it was chosen, or the filter verdict of a refused node unless its refusal is common.
func printDecisionTable(env *Env, rec decisionapi.Record, plugins []string, common map[string]bool) error {
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	head := []string{"  NODE"}
	for _, p := range plugins {
		head = append(head, fmt.Sprintf("%s (×%d)", p, rec.Weights[p]))
	}
	fmt.Fprintln(tw, strings.Join(append(head, "TOTAL", "CHOSEN"), "\t"))
	for _, n := range rec.Nodes {
		row := []string{"  " + n.Node}
		if n.Filter != nil {
			why := n.Filter.Plugin + ": " + strings.Join(n.Filter.Reasons, "; ")
			if !common[why] {
				fmt.Fprintln(tw, strings.Join(append(row, "refused by "+why), "\t"))
			}
			continue
		}
		fmt.Fprintln(tw, strings.Join(append(row, scoredNodeCells(n, plugins)...), "\t"))
	}
	return tw.Flush()
}

// scoredNodeCells are the cells of a node that passed the filters: each plugin's normalised
// score (with the raw one when it differs, and the plugin's inputs), the total and the mark of
// the chosen node.
func scoredNodeCells(n decisionapi.NodeRecord, plugins []string) []string {
	var row []string
	for _, p := range plugins {
		s, ok := n.Score(p)
		if !ok {
			row = append(row, "-")
			continue
		}
		cell := fmt.Sprint(s.Normalized)
		if s.Raw != s.Normalized {
			cell += fmt.Sprintf(" (raw %d)", s.Raw)
		}
		if d := n.DetailText(p); d != "" {
			cell += " [" + d + "]"
		}
		row = append(row, cell)
	}
	mark := ""
	if n.Chosen {
		mark = "*"
	}
	total := "-"
	if len(n.Scores) > 0 {
		total = fmt.Sprint(n.Total)
	}
	return append(row, total, mark)
}
