package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

// writeTable prints a record as `kubectl berth explain` does: a header, one row per listed
// node (filter verdict, each Score plugin's normalised score, total, chosen), what was left
// out, and the inputs the plugins reported.
func writeTable(w io.Writer, rec decisionapi.Record) error {
	writeHeader(w, rec)
	plugins := sortedScorePlugins(rec)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"NODE", "FILTER"}
	for _, p := range plugins {
		head = append(head, fmt.Sprintf("%s(×%d)", p, rec.Weights[p]))
	}
	head = append(head, "TOTAL", "CHOSEN")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, n := range rec.Nodes {
		fmt.Fprintln(tw, strings.Join(nodeRow(n, plugins), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeFooter(w, rec)
	return nil
}

// writeHeader prints the pod, the attempt and its outcome, and what the scheduler did instead
// of scoring every node, if anything.
func writeHeader(w io.Writer, rec decisionapi.Record) {
	fmt.Fprintf(w, "Pod %s/%s (uid %s), profile %s, attempt %d at %s: %s", rec.Namespace, rec.Name, rec.UID, rec.Profile, rec.Attempts, rec.Started.UTC().Format("2006-01-02T15:04:05Z"), rec.Outcome)
	if rec.Chosen != "" {
		fmt.Fprintf(w, " on %s", rec.Chosen)
	}
	fmt.Fprintln(w)
	if rec.PreFilter != nil {
		fmt.Fprintf(w, "PreFilter %s refused the pod for every node: %s\n", rec.PreFilter.Plugin, strings.Join(rec.PreFilter.Reasons, "; "))
	}
	if rec.NodeHint != "" {
		fmt.Fprintf(w, "Opportunistic batching hinted %s from %s's scoring (see its record).\n", rec.NodeHint, rec.HintFrom)
	}
	if rec.ScoringSkipped {
		fmt.Fprintln(w, "Only one node passed the filters: the scheduler did not score.")
	}
	if rec.Error != "" {
		fmt.Fprintf(w, "Error: %s\n", rec.Error)
	}
}

// sortedScorePlugins lists the Score plugins of rec in a stable order: heaviest weight first,
// then by name.
func sortedScorePlugins(rec decisionapi.Record) []string {
	plugins := rec.ScorePlugins()
	sort.Slice(plugins, func(i, j int) bool {
		wi, wj := rec.Weights[plugins[i]], rec.Weights[plugins[j]]
		if wi != wj {
			return wi > wj
		}
		return plugins[i] < plugins[j]
	})
	return plugins
}

// nodeRow is one node's row: its filter verdict, each of plugins' score, the total and the
// mark of the chosen node.
func nodeRow(n decisionapi.NodeRecord, plugins []string) []string {
	row := []string{n.Node}
	switch {
	case n.Filter != nil:
		row = append(row, n.Filter.Plugin+": "+strings.Join(n.Filter.Reasons, "; "))
	default:
		row = append(row, "passed")
	}
	for _, p := range plugins {
		s, ok := n.Score(p)
		switch {
		case !ok:
			row = append(row, "-")
		case s.Raw != s.Normalized:
			row = append(row, fmt.Sprintf("%d (raw %d)", s.Normalized, s.Raw))
		default:
			row = append(row, fmt.Sprintf("%d", s.Normalized))
		}
	}
	total := "-"
	if len(n.Scores) > 0 {
		total = fmt.Sprintf("%d", n.Total)
	}
	mark := ""
	if n.Chosen {
		mark = "*"
	}
	return append(row, total, mark)
}

// writeFooter prints the counts of feasible and refused nodes, what was left out, the
// refusals by plugin and reason, PostFilter's outcome and the inputs the plugins read.
func writeFooter(w io.Writer, rec decisionapi.Record) {
	fmt.Fprintf(w, "%d feasible, %d refused", rec.Feasible, rec.Refused)
	if rec.OmittedFeasible+rec.OmittedRefused > 0 {
		fmt.Fprintf(w, "; not listed: %d feasible, %d refused", rec.OmittedFeasible, rec.OmittedRefused)
	}
	fmt.Fprintln(w)
	for _, r := range rec.RefusedBy {
		fmt.Fprintf(w, "  refused by %s on %d node(s): %s\n", r.Plugin, r.Nodes, r.Reason)
	}
	if rec.PostFilter != "" {
		fmt.Fprintf(w, "PostFilter: %s\n", rec.PostFilter)
	}
	var details []string
	for _, n := range rec.Nodes {
		details = append(details, n.InputLines()...)
	}
	if len(details) > 0 {
		fmt.Fprintln(w, "Inputs the plugins read:")
		for _, d := range details {
			fmt.Fprintln(w, "  "+d)
		}
	}
}
