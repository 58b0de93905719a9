package placement

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/berth-sched/berth/e2e/stack"
	"github.com/berth-sched/berth/pkg/loadapi"
)

// HotPercent is the CPU utilisation above which a node counts as hot.
const HotPercent = 90

// Targets are the utilisations whose ±10-point band the table reports for every run.
var Targets = []float64{40, 60}

// RunResult is one run's figures, all read from the running system.
type RunResult struct {
	Key, Name string
	// Util is each node's CPU utilisation at the end: the mean of the watcher's Latest CPU
	// over its last few answers.
	Util map[string]float64
	// NoData are nodes the watcher did not serve at the end.
	NoData []string
	// HotNodes were above HotPercent in at least one watcher answer; HotNodeMinutes sums
	// the time they spent there (poll interval per answer).
	HotNodes       int
	HotNodeMinutes float64
	// Placed and Unplaced count the pods that should be running at the end (API server);
	// Oversized of the unplaced are bigger than any node.
	Placed, Unplaced, Oversized int
	CreateErrors                int
	NodesWithPods               int
	Waves, WavesRun             int
	Polls, FailedPolls          int
	// ServedVsSimulated is the mean |served − simulated| CPU over nodes at the end, in points:
	// small when the agent → watcher path carries the simulator's load faithfully.
	ServedVsSimulated float64
	// AvgLag and MaxLag compare, in the watcher's last answer, each node's Latest CPU with the
	// window average the plugins score (what TargetLoadPacking reads): how far the served
	// average trails what the node uses now.
	AvgLag, MaxLag float64
	// MaxOvershoot is the largest excess, over every answer of the run, of the hottest node's
	// Latest CPU above the reference: the target, or the nodes' mean when that is higher (no
	// placement can keep every node under the mean). MinutesOver20 are the node-minutes spent
	// more than 20 points above the reference, in real-cluster minutes (bench time ÷ TimeScale).
	// EndOvershoot is the same excess in the end utilisation (after the reports caught up).
	MaxOvershoot, MinutesOver20, EndOvershoot float64
	// PredWorkload and PredBare are the placement-time prediction errors (predict.go) of the
	// workloads' pods and of bare pods, PredWindow how long after placement they were measured,
	// PredMissing the placed pods without a usable prediction (no record, or no
	// TargetLoadPacking in it).
	PredWorkload, PredBare PredStat
	// PredProfiled is the error of the pods (of either kind) whose decision record says they
	// were estimated from their workload's profile, not their spec.
	PredProfiled PredStat
	// PredNamespace is the same over the pods estimated from their namespace's ratio.
	PredNamespace PredStat
	PredWindow    time.Duration
	PredMissing   int
	// Level and Seed say which table cell the run belongs to ("" and the seed in Execute).
	Level    string
	Seed     uint64
	Duration time.Duration
	Notes    []string
	noted    map[string]bool
}

func (r *RunResult) noteOnce(key, msg string) {
	if r.noted == nil {
		r.noted = map[string]bool{}
	}
	if !r.noted[key] {
		r.noted[key] = true
		r.Notes = append(r.Notes, msg)
	}
}

// NearShare is the share of the scenario's nodes whose end utilisation is within ±10 points
// of target; nodes without data count as not near.
func (r *RunResult) NearShare(target float64, nodes int) float64 {
	if nodes == 0 {
		return 0
	}
	near := 0
	for _, u := range r.Util {
		if math.Abs(u-target) <= 10 {
			near++
		}
	}
	return float64(near) / float64(nodes)
}

// MeanStd is the mean and population standard deviation of the end utilisation across the
// nodes with data.
func (r *RunResult) MeanStd() (mean, std float64) {
	if len(r.Util) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, u := range r.Util {
		mean += u
	}
	mean /= float64(len(r.Util))
	for _, u := range r.Util {
		std += (u - mean) * (u - mean)
	}
	return mean, math.Sqrt(std / float64(len(r.Util)))
}

func (r *RunResult) summary() string {
	m, s := r.MeanStd()
	return fmt.Sprintf("util mean %.1f std %.1f, hot %d (%.1f node-min), unplaced %d, nodes with pods %d, %d/%d waves, %d/%d polls failed, %s",
		m, s, r.HotNodes, r.HotNodeMinutes, r.Unplaced, r.NodesWithPods, r.WavesRun, r.Waves, r.FailedPolls, r.Polls, r.Duration.Round(time.Second))
}

// poller reads the watcher for the whole run.
type poller struct {
	url   string
	nodes []string
	start time.Time

	mu        sync.Mutex
	polls     int
	failed    int
	firstFail time.Duration
	lastOK    time.Duration
	lastErr   error
	hot       map[string]float64 // node → seconds above HotPercent
	recent    []map[string]float64
	// hist is every answer's Latest CPU, for the prediction error's measurement.
	hist    []histAnswer
	lastAvg map[string]float64 // window AVG CPU in the last answer
	prev    time.Time
	// target and timeScale: see RunResult.MaxOvershoot (0 target: overshoot not tracked).
	target, timeScale float64
	maxOver           float64
	over20Seconds     float64
	// hottest is the answer that set maxOver: which node, when, and its Latest CPU against the
	// window average (what the plugins start from), so the table's note tells a load that rose
	// inside the window from a node that stayed hot.
	hottest hotMoment
	milli   map[string]int64 // node → milliCPU, for the note and the plugins' view
	// ledger, when set, says what made up a node's load in the simulator at the hottest moment;
	// placed, when set, what the scheduler's plugins added to it for placed pods then.
	ledger  func(node string) Breakdown
	running func(node string) []string
	placed  func(ctx context.Context, node string, milliCPU int64) string
}

type hotMoment struct {
	node        string
	at          time.Duration
	latest, avg float64
	ledger      *Breakdown
	placed      string
	pods        []string // running on the node then
}

// reference is what overshoot is measured from: the target, or the mean of util if higher.
func reference(target float64, util map[string]float64) float64 {
	if len(util) == 0 {
		return target
	}
	var mean float64
	for _, u := range util {
		mean += u
	}
	return max(target, mean/float64(len(util)))
}

// finalPolls is how many of the last answers the end utilisation averages (bursty pods make
// one answer noisy).
const finalPolls = 5

func newPoller(url string, sc *Scenario, start time.Time) *poller {
	p := &poller{url: url, start: start, firstFail: -1, hot: map[string]float64{}, milli: map[string]int64{}}
	for _, n := range sc.Nodes {
		p.nodes = append(p.nodes, n.Name)
		p.milli[n.Name] = n.MilliCPU
	}
	return p
}

func (p *poller) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.pollOnce(ctx, interval)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *poller) pollOnce(ctx context.Context, interval time.Duration) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	resp, err := stack.GetWatcher(rctx, p.url)
	cancel()
	if ctx.Err() != nil {
		return // the run ended; not a watcher failure
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	if err != nil {
		p.failed++
		p.lastErr = err
		if p.firstFail < 0 {
			p.firstFail = now.Sub(p.start)
		}
		p.prev = time.Time{}
		return
	}
	dt := interval.Seconds()
	if !p.prev.IsZero() {
		dt = now.Sub(p.prev).Seconds()
	}
	p.prev = now
	p.lastOK = now.Sub(p.start)
	p.lastAvg = AvgCPU(resp)
	before := p.maxOver
	latest := LatestCPU(resp)
	p.hist = append(p.hist, histAnswer{at: now, latest: latest})
	p.observe(latest, dt)
	if p.maxOver > before && p.placed != nil {
		// The scheduler's view is read only when the record moves (a handful of times a run),
		// and without the lock: it is an HTTP call.
		node, at := p.hottest.node, p.hottest.at
		p.mu.Unlock()
		view := p.placed(ctx, node, p.milli[node])
		p.mu.Lock()
		if p.hottest.node == node && p.hottest.at == at {
			p.hottest.placed = view
		}
	}
}

// histAnswer is one watcher answer's Latest CPU per node.
type histAnswer struct {
	at     time.Time
	latest map[string]float64
}

// measuredAt is node's Latest CPU around t: the mean of the answers within 1.5 s of it, or, when
// t is after the last answer, that answer; it also says when that was.
func (p *poller) measuredAt(node string, t time.Time) (float64, time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.hist) == 0 {
		return 0, time.Time{}, false
	}
	if last := p.hist[len(p.hist)-1]; t.After(last.at) {
		v, ok := last.latest[node]
		return v, last.at, ok
	}
	var sum float64
	n := 0
	for _, h := range p.hist {
		if d := h.at.Sub(t); d >= -1500*time.Millisecond && d <= 1500*time.Millisecond {
			if v, ok := h.latest[node]; ok {
				sum += v
				n++
			}
		}
	}
	if n == 0 {
		return 0, time.Time{}, false
	}
	return sum / float64(n), t, true
}

// observe takes one answer's Latest CPU per node, dt seconds after the previous answer.
// Callers hold p.mu.
func (p *poller) observe(latest map[string]float64, dt float64) {
	ref := reference(p.target, latest)
	for node, cpu := range latest {
		if cpu > HotPercent {
			p.hot[node] += dt
		}
		if p.target > 0 {
			if over := cpu - ref; over > p.maxOver {
				p.maxOver = over
				p.hottest = hotMoment{node: node, at: p.lastOK, latest: cpu, avg: p.lastAvg[node]}
				if p.ledger != nil {
					b := p.ledger(node)
					p.hottest.ledger = &b
				}
				if p.running != nil {
					p.hottest.pods = p.running(node)
				}
			}
			if cpu > ref+20 {
				p.over20Seconds += dt
			}
		}
	}
	p.recent = append(p.recent, latest)
	if len(p.recent) > finalPolls {
		p.recent = p.recent[1:]
	}
}

// LatestCPU is each node's newest CPU sample as the watcher serves it (operator Latest).
func LatestCPU(r *loadapi.Response) map[string]float64 {
	out := map[string]float64{}
	for node, nm := range r.Data.NodeMetricsMap {
		for _, m := range nm.Metrics {
			if m.Type == "CPU" && m.Operator == "Latest" {
				out[node] = m.Value
			}
		}
	}
	return out
}

// AvgCPU is each node's served window-average CPU (operator AVG).
func AvgCPU(r *loadapi.Response) map[string]float64 {
	out := map[string]float64{}
	for node, nm := range r.Data.NodeMetricsMap {
		for _, m := range nm.Metrics {
			if m.Type == "CPU" && m.Operator == "AVG" {
				out[node] = m.Value
			}
		}
	}
	return out
}

// finish writes the poller's figures into r.
func (p *poller) finish(r *RunResult, interval time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.Polls, r.FailedPolls = p.polls, p.failed
	r.Util = map[string]float64{}
	for _, node := range p.nodes {
		var sum float64
		var n int
		for _, ans := range p.recent {
			if v, ok := ans[node]; ok {
				sum += v
				n++
			}
		}
		if n == 0 {
			r.NoData = append(r.NoData, node)
			continue
		}
		r.Util[node] = sum / float64(n)
	}
	if len(p.recent) > 0 {
		last := p.recent[len(p.recent)-1]
		n := 0
		for node, avg := range p.lastAvg {
			if l, ok := last[node]; ok {
				r.AvgLag += l - avg
				r.MaxLag = max(r.MaxLag, l-avg)
				n++
			}
		}
		if n > 0 {
			r.AvgLag /= float64(n)
			r.Notes = append(r.Notes, fmt.Sprintf("at the end the served window average (what the plugins score) trails Latest CPU by %.1f points on average, %.1f at most", r.AvgLag, r.MaxLag))
		}
	}
	for _, s := range p.hot {
		if s > 0 {
			r.HotNodes++
			r.HotNodeMinutes += s / 60
		}
	}
	p.finishOvershoot(r)
	if p.failed > 0 {
		msg := fmt.Sprintf("watcher unreachable in %d of %d polls from %.0f s (%v); hot-node figures cover only answered polls",
			p.failed, p.polls, p.firstFail.Seconds(), p.lastErr)
		if len(p.recent) > 0 {
			msg += fmt.Sprintf("; utilisation is its last answer, at %.0f s", p.lastOK.Seconds())
		} else {
			msg += "; it never answered, so there is no utilisation"
		}
		r.Notes = append(r.Notes, msg)
	}
	if len(r.NoData) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d nodes without load data at the end (counted as not near target): %s",
			len(r.NoData), strings.Join(first(r.NoData, 5), ", ")))
	}
	if r.WavesRun < r.Waves {
		r.Notes = append(r.Notes, fmt.Sprintf("only %d of %d waves ran", r.WavesRun, r.Waves))
	}
}

// finishOvershoot writes the overshoot figures and the hottest moment's note into r. Callers
// hold p.mu.
func (p *poller) finishOvershoot(r *RunResult) {
	if p.target <= 0 {
		return
	}
	scale := p.timeScale
	if scale <= 0 {
		scale = 1
	}
	r.MaxOvershoot, r.MinutesOver20 = p.maxOver, p.over20Seconds/60/scale
	if h := p.hottest; h.node != "" {
		note := fmt.Sprintf("hottest moment: %s (%d CPUs) at %.0f s, Latest CPU %.1f %% (%.1f over), window average %.1f %%",
			h.node, p.milli[h.node]/1000, h.at.Seconds(), h.latest, p.maxOver, h.avg)
		if h.placed != "" {
			note += ", " + h.placed
		}
		if h.ledger != nil {
			note += "; " + h.ledger.String()
		}
		r.Notes = append(r.Notes, note)
	}
	ref := reference(p.target, r.Util)
	for _, u := range r.Util {
		r.EndOvershoot = max(r.EndOvershoot, u-ref)
	}
}

func first(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), fmt.Sprintf("… %d more", len(s)-n))
}

// Print writes the table, then each run's utilisation histogram and notes.
func (res *Result) Print(w io.Writer) {
	sc := res.Scenario
	o := res.Options
	t := sc.Totals()
	fmt.Fprintf(w, "Placement quality on simulated real load: seed %d, %d nodes (%.0f cores, base load %.0f %%), %d pods in %d waves "+
		"(%d stay: %.0f %% of CPU requested, mean use %.0f %% of capacity)\n",
		sc.Seed, len(sc.Nodes), float64(t.MilliCPU)/1000, 100*t.BaseMilliCPU/float64(t.MilliCPU), len(sc.Pods), sc.Waves,
		countStay(sc), 100*float64(t.EndReqMilliCPU)/float64(t.MilliCPU), 100*(t.BaseMilliCPU+t.EndUseMilliCPU)/float64(t.MilliCPU))
	fmt.Fprintf(w, "Load path: fixture /proc → berth-agent (pkg/agent, sample %s, report %s) → berth-loadwatcher → scheduler (refresh %ds); "+
		"waves every %s, %s settle; utilisation = watcher's Latest CPU, mean of its last %d answers.\n\n",
		o.SampleInterval, o.ReportInterval, o.RefreshSeconds, o.WavePause, o.Settle, finalPolls)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "run\t")
	for _, tg := range Targets {
		fmt.Fprintf(tw, "±10 of %.0f%%\t", tg)
	}
	fmt.Fprintf(tw, ">%d%% nodes\t>%d%% node-min\tutil mean\tutil std\tunplaced\tnodes with pods\twaves\twatcher polls failed\tserved−sim\t\n", HotPercent, HotPercent)
	for _, r := range res.Runs {
		fmt.Fprintf(tw, "%s\t", r.Name)
		for _, tg := range Targets {
			fmt.Fprintf(tw, "%.0f %%\t", 100*r.NearShare(tg, len(sc.Nodes)))
		}
		m, s := r.MeanStd()
		unplaced := fmt.Sprint(r.Unplaced)
		if r.Oversized > 0 {
			unplaced = fmt.Sprintf("%d (%d oversized)", r.Unplaced, r.Oversized)
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%s\t%d/%d\t%d/%d\t%d/%d\t%.1f\t\n", r.HotNodes, r.HotNodeMinutes, m, s, unplaced,
			r.NodesWithPods, len(sc.Nodes), r.WavesRun, r.Waves, r.FailedPolls, r.Polls, r.ServedVsSimulated)
	}
	tw.Flush()
	if ov := sc.Oversized(); len(ov) > 0 {
		fmt.Fprintf(w, "\n%d pods request more CPU or memory than any node has (%s): no scheduler can place them.\n", len(ov), strings.Join(first(ov, 5), ", "))
	}
	fmt.Fprintln(w, "\nNode CPU utilisation at the end (nodes per 10-point bucket):")
	for _, r := range res.Runs {
		fmt.Fprintf(w, "\n%s\n", r.Name)
		fmt.Fprint(w, Histogram(r.Util))
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
}

func countStay(sc *Scenario) int {
	n := 0
	for _, p := range sc.Pods {
		if p.Leave < 0 {
			n++
		}
	}
	return n
}

// Histogram draws one line per 10-point bucket (100 % falls in the last one).
func Histogram(util map[string]float64) string {
	var buckets [10]int
	for _, u := range util {
		b := int(u / 10)
		b = min(max(b, 0), 9)
		buckets[b]++
	}
	var sb strings.Builder
	for i, n := range buckets {
		fmt.Fprintf(&sb, "  %3d–%-3d %% | %-*s %d\n", 10*i, 10*(i+1), maxBar, strings.Repeat("#", min(n, maxBar)), n)
	}
	return sb.String()
}

const maxBar = 50
