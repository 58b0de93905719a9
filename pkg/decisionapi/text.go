package decisionapi

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Plugin names whose details the summary and the table understand.
const (
	pluginTLP     = "TargetLoadPacking"
	pluginLVRB    = "LoadVariationRiskBalancing"
	pluginSySched = "SySched"
)

// Load returns a node's load-aware detail for plugin, whatever shape it travelled in (the
// scheduler holds LoadDetail values, a client decoded JSON into map[string]any).
func (n NodeRecord) Load(plugin string) (*LoadDetail, bool) {
	var d LoadDetail
	return &d, n.detail(plugin, &d)
}

// SySched returns a node's SySched detail.
func (n NodeRecord) SySched() (*SySchedDetail, bool) {
	var d SySchedDetail
	return &d, n.detail(pluginSySched, &d)
}

func (n NodeRecord) detail(plugin string, into any) bool {
	v, ok := n.Details[plugin]
	if !ok || v == nil {
		return false
	}
	if copyDetail[LoadDetail](v, into) || copyDetail[SySchedDetail](v, into) {
		return true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return json.Unmarshal(b, into) == nil
}

// copyDetail copies v into into when v is a T (or a non-nil *T) and into a *T: a record built
// in process holds the plugin's own value, one decoded from JSON a map.
func copyDetail[T any](v, into any) bool {
	p, ok := into.(*T)
	if !ok {
		return false
	}
	switch x := v.(type) {
	case T:
		*p = x
		return true
	case *T:
		if x != nil {
			*p = *x
			return true
		}
	}
	return false
}

// Score returns the node's result of one plugin.
func (n NodeRecord) Score(plugin string) (PluginScore, bool) {
	for _, s := range n.Scores {
		if s.Plugin == plugin {
			return s, true
		}
	}
	return PluginScore{}, false
}

// DetailText is the short explanation of a plugin's score on a node, or "".
func (n NodeRecord) DetailText(plugin string) string {
	switch plugin {
	case pluginTLP:
		d, ok := n.Load(plugin)
		if !ok {
			return ""
		}
		if d.Neutral {
			return "load " + d.Freshness + ", neutral"
		}
		return fmt.Sprintf("util %s %%→%s %%", num(d.MeasuredPercent), num(d.PredictedPercent))
	case pluginLVRB:
		d, ok := n.Load(plugin)
		if !ok {
			return ""
		}
		if d.Neutral {
			return "load " + d.Freshness + ", neutral"
		}
		var parts []string
		if d.CPU.Valid {
			parts = append(parts, fmt.Sprintf("cpu μ %s %% σ %s %%", num(d.CPU.AvgPercent), num(d.CPU.StdPercent)))
		}
		if d.Memory.Valid {
			parts = append(parts, fmt.Sprintf("mem μ %s %% σ %s %%", num(d.Memory.AvgPercent), num(d.Memory.StdPercent)))
		}
		return strings.Join(parts, ", ")
	case pluginSySched:
		if d, ok := n.SySched(); ok {
			return fmt.Sprintf("ExS %d", d.ExS)
		}
	default:
		if d, ok := n.termsDetail(plugin); ok {
			if d.Neutral {
				return "load " + d.Freshness + ", neutral"
			}
			return termsText(d.Terms, true)
		}
	}
	return ""
}

// termsDetail is a plugin's LoadDetail when it explains itself through Terms.
func (n NodeRecord) termsDetail(plugin string) (*LoadDetail, bool) {
	d, ok := n.Load(plugin)
	return d, ok && d.Freshness != "" && (len(d.Terms) > 0 || d.Neutral)
}

// termsText writes terms as "cpu a 1, b 2; memory a 3" (only the key ones when short).
func termsText(terms []Term, short bool) string {
	var groups []string
	res, cur := "", ""
	flush := func() {
		if cur != "" {
			groups = append(groups, strings.TrimSpace(res+" "+cur))
		}
	}
	for _, t := range terms {
		if short && !t.Key {
			continue
		}
		if t.Resource != res {
			flush()
			res, cur = t.Resource, ""
		}
		if cur != "" {
			cur += ", "
		}
		cur += t.Name + " " + strconv.FormatFloat(t.Value, 'g', 4, 64)
	}
	flush()
	return strings.Join(groups, "; ")
}

// InputLines are the inputs each plugin reported for this node, one line each, prefixed with
// the node and plugin ("" plugins skipped): what `kubectl berth explain` prints under the table.
func (n NodeRecord) InputLines() []string {
	var lines []string
	if d, ok := n.Load(pluginTLP); ok {
		lines = append(lines, n.Node+" "+pluginTLP+": "+tlpText(d))
	}
	if d, ok := n.Load(pluginLVRB); ok {
		lines = append(lines, n.Node+" "+pluginLVRB+": "+lvrbText(d))
	}
	if d, ok := n.SySched(); ok {
		lines = append(lines, fmt.Sprintf("%s %s: ExS %d = |H∖P| %d + %d pods × |H∪P| %d − Σ|S_q| %d (|H| %d, |P| %d)",
			n.Node, pluginSySched, d.ExS, d.HMinusP, d.Pods, d.HUnionP, d.SumPodSet, d.NodeSet, d.PodSet))
		for _, note := range d.Notes {
			lines = append(lines, n.Node+" "+pluginSySched+": "+note)
		}
	}
	return append(lines, n.termsLines()...)
}

// termsLines are the input lines of the plugins that explain themselves through Terms, in
// name order.
func (n NodeRecord) termsLines() []string {
	var names []string
	for p := range n.Details {
		if p != pluginTLP && p != pluginLVRB && p != pluginSySched {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	var lines []string
	for _, p := range names {
		d, ok := n.termsDetail(p)
		switch {
		case !ok:
		case d.Neutral:
			lines = append(lines, n.Node+" "+p+": load "+d.Freshness+": neutral score")
		default:
			lines = append(lines, fmt.Sprintf("%s %s: %s → %s; unreported %dm/%d B%s; %s%s",
				n.Node, p, termsText(d.Terms, false), d.Formula, d.UnreportedMilliCPU, d.UnreportedMemoryBytes, heldText(d), sampleText(d), estimateText(d)))
		}
	}
	return lines
}

func num(f float64) string {
	s := fmt.Sprintf("%.1f", f)
	return strings.TrimSuffix(s, ".0")
}

// Summary is the one-line account of a scheduled pod's decision, e.g. "TargetLoadPacking 78
// (util 25 %→26 %), SySched 100 (ExS 0), total 356; next best node-2 301". Plugins that added
// nothing on the chosen node are left out. It is cut at max bytes (0: no limit); "" when
// the record has no chosen node.
func Summary(rec Record, max int) string {
	var chosen, next *NodeRecord
	for i := range rec.Nodes {
		n := &rec.Nodes[i]
		switch {
		case n.Node == rec.Chosen && n.Feasible:
			chosen = n
		case n.Feasible && next == nil && len(n.Scores) > 0:
			next = n
		}
	}
	if chosen == nil {
		return ""
	}
	var b strings.Builder
	if len(chosen.Scores) == 0 {
		switch {
		case rec.NodeHint != "" && rec.HintFrom != "":
			fmt.Fprintf(&b, "reused the scoring of %s (identical pod, opportunistic batching)", rec.HintFrom)
		case rec.ScoringSkipped:
			b.WriteString("the only feasible node, not scored")
		default:
			b.WriteString("not scored")
		}
		if rec.Refused > 0 {
			fmt.Fprintf(&b, "; %d nodes refused", rec.Refused)
		}
		return cut(b.String(), max)
	}
	scores := append([]PluginScore(nil), chosen.Scores...)
	sort.SliceStable(scores, func(i, j int) bool { return scores[i].Weighted > scores[j].Weighted })
	first := true
	for _, s := range scores {
		if s.Weighted == 0 && chosen.DetailText(s.Plugin) == "" {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "%s %d", s.Plugin, s.Normalized)
		if s.Weight != 1 {
			fmt.Fprintf(&b, "×%d", s.Weight)
		}
		if d := chosen.DetailText(s.Plugin); d != "" {
			fmt.Fprintf(&b, " (%s)", d)
		}
	}
	if !first {
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "total %d", chosen.Total)
	if next != nil {
		fmt.Fprintf(&b, "; next best %s %d", next.Node, next.Total)
	}
	return cut(b.String(), max)
}

func cut(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	// Cut on a rune boundary.
	i := max - len("…")
	for i > 0 && (s[i]&0xC0) == 0x80 {
		i--
	}
	return s[:i] + "…"
}

func sampleText(d *LoadDetail) string {
	s := fmt.Sprintf("%s sample %ss old", d.Freshness, num(d.AgeSeconds))
	if d.Source != "" {
		s = d.Source + " " + s
	}
	return s
}

func tlpText(d *LoadDetail) string {
	if d.Neutral {
		return "load " + d.Freshness + ": neutral score"
	}
	headroom := ""
	if d.HeadroomPercent > 0 {
		headroom = fmt.Sprintf(" + headroom %s %%", num(d.HeadroomPercent))
	}
	return fmt.Sprintf("measured %s %% of %dm; + pod %dm + unreported %dm%s%s → %s %% (target %d %%); %s%s",
		num(d.MeasuredPercent), d.CapacityMilliCPU, d.PodMilliCPU, d.UnreportedMilliCPU, heldText(d), headroom, num(d.PredictedPercent), d.TargetPercent, sampleText(d), estimateText(d))
}

// estimateText says where the pod's estimate came from ("" when the record does not say).
func estimateText(d *LoadDetail) string {
	e := d.PodEstimate
	switch e.Source {
	case EstimateFromProfile:
		ramp := ""
		if e.RampSeconds > 0 {
			ramp = fmt.Sprintf(", reached in %ss", num(e.RampSeconds))
		}
		return fmt.Sprintf("; pod estimate from profile %s: %dm/%d B (p %sm, spread %s, %d siblings%s, %ss old)",
			e.Workload, e.EstimateMilliCPU, e.EstimateMemoryBytes, num(e.PercentileMilliCPU), num2(e.SpreadCPU), e.Samples, ramp, num(e.AgeSeconds))
	case EstimateFromSpec, EstimateFromNamespace:
		s := "; pod estimate from " + e.Source + ": " + e.Reason
		if e.Workload != "" {
			s += " (" + e.Workload
			if e.Samples > 0 {
				s += fmt.Sprintf(", %d siblings, spread %s", e.Samples, num2(max(e.SpreadCPU, e.SpreadMemory)))
			}
			s += ")"
		}
		if n := e.Namespace; n != nil {
			s += fmt.Sprintf("; namespace uses %s ± %s of its CPU request (%d pods, %ss old)", num2(n.Mean), num2(n.SD), n.Pods, num(n.AgeSeconds))
			if e.Source == EstimateFromNamespace {
				s += fmt.Sprintf(": %dm of %dm", n.EstimateMilliCPU, n.RequestMilliCPU)
			}
		}
		return s
	}
	return ""
}

func num2(f float64) string { return fmt.Sprintf("%.2f", f) }

// heldText says how much of the unreported CPU pods in their estimate window make, if any.
func heldText(d *LoadDetail) string {
	if d.HeldAtEstimateMilliCPU <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%dm of it held at estimate by estimateSeconds)", d.HeldAtEstimateMilliCPU)
}

func lvrbText(d *LoadDetail) string {
	if d.Neutral {
		return "load " + d.Freshness + ": neutral score"
	}
	var parts []string
	for _, r := range []struct {
		name string
		t    RiskTerms
	}{{"cpu", d.CPU}, {"memory", d.Memory}} {
		if !r.t.Valid {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s μ %s %% σ %s %% of %s, request %s → %s", r.name, num(r.t.AvgPercent), num(r.t.StdPercent), num(r.t.Allocatable), num(r.t.Request), num(r.t.Score)))
	}
	return strings.Join(parts, "; ") + fmt.Sprintf("; unreported %dm/%d B%s; %s", d.UnreportedMilliCPU, d.UnreportedMemoryBytes, heldText(d), sampleText(d)) + estimateText(d)
}
