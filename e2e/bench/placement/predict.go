package placement

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

// The placement-time prediction error: for each pod, what was predicted for the node it was put
// on when it was put there (the scheduler's decision record: TargetLoadPacking's predicted
// utilisation with the pod; for the oracle, the node's true mean load with it) against what the
// watcher measured on that node one window later, less what other pods bound there or deleted
// from there in between add or take away (their true mean use, from the simulator's ledger).

// prediction is one pod's.
type prediction struct {
	pod, node string
	at        time.Time
	predicted float64
	workload  bool
	// profiled: the record says the pod was estimated from its workload's profile;
	// fromNamespace: from its namespace's use-to-request ratio.
	profiled, fromNamespace bool
}

// PredStat is the median error over a kind of pods (NaN with none): absolute and signed
// (predicted − measured: positive when the prediction was too high).
type PredStat struct {
	N                     int
	MedianAbs, MedianBias float64
}

// predictions collects a run's predictions. The oracle chooses its pods' nodes one at a time in
// the order the informer sees them (its greedy order) on one worker; the API calls (the oracle's
// bindings, the decision records' reads) run on up to callWorkers goroutines, as a scheduler binds
// asynchronously, so a slow API server does not leave the last waves unbound.
type predictions struct {
	mu      sync.Mutex
	list    []prediction
	seen    map[string]bool
	missing int
	jobs    chan func(context.Context)
	closed  bool
	done    chan struct{}
	calls   sync.WaitGroup
	slots   chan struct{}
	x       *replay
}

const callWorkers = 8

func newPredictions() *predictions {
	return &predictions{seen: map[string]bool{}, jobs: make(chan func(context.Context), 1<<14), done: make(chan struct{}),
		slots: make(chan struct{}, callWorkers)}
}

// start runs the worker until stop.
func (ps *predictions) start(ctx context.Context, x *replay) {
	ps.x = x
	go func() {
		defer close(ps.done)
		for job := range ps.jobs {
			if ctx.Err() == nil {
				job(ctx)
			}
		}
	}()
}

// call runs f on one of the call goroutines.
func (ps *predictions) call(ctx context.Context, f func(context.Context)) {
	ps.calls.Add(1)
	ps.slots <- struct{}{}
	go func() {
		defer func() { <-ps.slots; ps.calls.Done() }()
		f(ctx)
	}()
}

// stop ends the worker after the queued jobs and their calls.
func (ps *predictions) stop() {
	ps.mu.Lock()
	if !ps.closed {
		ps.closed = true
		close(ps.jobs)
	}
	ps.mu.Unlock()
	<-ps.done
	ps.calls.Wait()
}

// enqueue runs job once per key on the worker.
func (ps *predictions) enqueue(key string, job func(context.Context)) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed || ps.seen[key] {
		return
	}
	ps.seen[key] = true
	select {
	case ps.jobs <- job:
	default:
		ps.missing++
	}
}

func (ps *predictions) add(p prediction) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.list = append(ps.list, p)
}

func (ps *predictions) miss() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.missing++
}

// placed reads pod's decision record: the chosen node and TargetLoadPacking's prediction there.
// Keyed by UID: a StatefulSet's replacement has its predecessor's name.
func (ps *predictions) placed(pod *corev1.Pod, workload bool) {
	x, name := ps.x, pod.Name
	ps.enqueue("record/"+string(pod.UID), func(ctx context.Context) {
		ps.call(ctx, func(ctx context.Context) {
			rec, err := x.probe.record(ctx, x.ns, name)
			if err != nil || rec.Chosen == "" {
				ps.miss()
				return
			}
			x.logOpening(rec)
			for _, n := range rec.Nodes {
				if n.Node != rec.Chosen {
					continue
				}
				if pred, ok := predicted(n); ok {
					d, _ := n.Load("TargetLoadPacking")
					ps.add(prediction{pod: name, node: n.Node, at: rec.Started, predicted: pred, workload: workload,
						profiled:      d.PodEstimate.Source == decisionapi.EstimateFromProfile,
						fromNamespace: d.PodEstimate.Source == decisionapi.EstimateFromNamespace})
					return
				}
			}
			ps.miss() // no TargetLoadPacking in the profile, or a neutral score
		})
	})
}

// bindOracle chooses an oracle pod's node (in order, on the worker), binds it (on a call
// goroutine) and records the oracle's prediction.
func (ps *predictions) bindOracle(pod *corev1.Pod) {
	x := ps.x
	pod = pod.DeepCopy()
	ps.enqueue("bind/"+string(pod.UID), func(ctx context.Context) {
		at := time.Now()
		node, load := x.orc.chooseLoad(pod.Name)
		if node == "" {
			x.note("bind", fmt.Sprintf("the oracle left pods unbound (first: no node fits %s)", pod.Name))
			return
		}
		ps.call(ctx, func(ctx context.Context) {
			err := x.orc.bindTo(ctx, x.c.Client, pod, node)
			if apierrors.IsNotFound(err) {
				return // deleted before its turn (a rollout or scale-down got there first)
			}
			if err != nil {
				x.note("bind", fmt.Sprintf("the oracle left pods unbound (first: %v)", err))
				return
			}
			ps.add(prediction{pod: pod.Name, node: node, at: at, predicted: load, workload: x.book.ofWorkload(pod.Name)})
		})
	})
}

// finish measures every prediction window after it was made (or at the last answer, for pods
// placed less than window before the end) and writes the medians into r.
func (ps *predictions) finish(r *RunResult, poll *poller, acct *Accounting, window time.Duration) {
	ps.mu.Lock()
	list := append([]prediction(nil), ps.list...)
	r.PredMissing = ps.missing
	ps.mu.Unlock()
	var wl, bare, prof, ns []float64
	for _, p := range list {
		measured, at, ok := poll.measuredAt(p.node, p.at.Add(window))
		if !ok {
			r.PredMissing++
			continue
		}
		err := p.predicted - (measured - acct.Drift(p.node, p.pod, p.at, at))
		if p.profiled {
			prof = append(prof, err)
		}
		if p.fromNamespace {
			ns = append(ns, err)
		}
		if p.workload {
			wl = append(wl, err)
		} else {
			bare = append(bare, err)
		}
	}
	r.PredWorkload, r.PredBare, r.PredProfiled, r.PredWindow = predStat(wl), predStat(bare), predStat(prof), window
	r.PredNamespace = predStat(ns)
}

func predStat(errs []float64) PredStat {
	s := PredStat{N: len(errs), MedianAbs: math.NaN(), MedianBias: math.NaN()}
	if len(errs) == 0 {
		return s
	}
	abs := make([]float64, len(errs))
	for i, e := range errs {
		abs[i] = math.Abs(e)
	}
	return PredStat{N: len(errs), MedianAbs: median(abs), MedianBias: median(errs)}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// predictionWindow is "one window": the agents' shortest averaging window on the run's time
// scale (5 minutes × TimeScale), by when the pod's own load has filled it.
func (o *Options) predictionWindow() time.Duration {
	if w := o.windows(); len(w) > 0 {
		return w[0]
	}
	return 5 * time.Minute
}

// record is pod's decision record from the scheduler's /debug/berth/explain.
func (p *placedProbe) record(ctx context.Context, ns, pod string) (*decisionapi.Record, error) {
	var rec decisionapi.Record
	if err := getJSON(ctx, p.client, p.explain+"?namespace="+ns+"&name="+pod, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// logOpening (-v) says why a pod went to a node nothing of the run's had loaded yet (predicted
// under openingPercent with it): the pod's estimate and where it came from, and the record's
// best-scored nodes (predicted utilisation with the pod; TargetLoadPacking's raw and normalized
// score; the node's total). Where a freed-nodes gap opens, this says what decided.
func (x *replay) logOpening(rec *decisionapi.Record) {
	const openingPercent = 25
	var chosen *decisionapi.LoadDetail
	for _, n := range rec.Nodes {
		if d, ok := n.Load("TargetLoadPacking"); ok && !d.Neutral && n.Node == rec.Chosen {
			chosen = d
		}
	}
	if chosen == nil || chosen.PredictedPercent >= openingPercent {
		return
	}
	nodes := append([]decisionapi.NodeRecord(nil), rec.Nodes...)
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].Total > nodes[j].Total })
	var top []string
	for _, n := range nodes {
		d, _ := n.Load("TargetLoadPacking")
		pred := "?"
		if d != nil {
			pred = fmt.Sprintf("%.1f %%", d.PredictedPercent)
		}
		var scores []string
		for _, ps := range n.Scores {
			scores = append(scores, fmt.Sprintf("%s=%d/%d", ps.Plugin, ps.Raw, ps.Normalized))
		}
		v := ""
		if n.Filter != nil {
			v = fmt.Sprintf(" refused %+v", *n.Filter)
		}
		top = append(top, fmt.Sprintf("%s %s %s total %d%s", n.Node, pred, strings.Join(scores, ","), n.Total, v))
	}
	x.o.Logf("%s: %s (%dm, from %s) went to %s at %.1f %% (%d nodes recorded); best: %s",
		x.rc.Name, rec.Name, chosen.PodMilliCPU, chosen.PodEstimate.Source, rec.Chosen, chosen.PredictedPercent, len(rec.Nodes), strings.Join(top, "; "))
}
