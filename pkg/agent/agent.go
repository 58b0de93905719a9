// Package agent is the node agent's load part: it samples the node's /proc, keeps windowed
// statistics, pushes reports to the load watcher and serves /metrics, /healthz and /readyz.
package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sched/berth/pkg/agent/load"
	"github.com/berth-sched/berth/pkg/agent/report"
	"github.com/berth-sched/berth/pkg/loadapi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Config is everything the load part needs; cmd/agent fills it from flags.
type Config struct {
	NodeName       string
	ProcRoot       string
	WatcherURL     string
	TokenFile      string
	Listen         string
	SampleInterval time.Duration
	ReportInterval time.Duration
	// Client watches this node's pods; nil reports no pod UIDs (for tests without a cluster).
	Client kubernetes.Interface
	// CgroupRoot is the cgroup hierarchy the pods' usage is read from (/sys/fs/cgroup on a
	// node, a fixture tree in tests); "" reports no per-pod usage.
	CgroupRoot string
	// Windows replaces load.Windows' lengths (same count; still reported under the
	// load-watcher names). Only benchmarks that compress time set it.
	Windows []time.Duration
	// HTTPClient talks to the watcher; nil uses a client with a 10 s timeout.
	HTTPClient *http.Client
}

// Agent runs the load part.
type Agent struct {
	cfg      Config
	sampler  *load.Sampler
	pusher   *report.Pusher
	pods     func() []load.PodRef
	podsSync func() bool
	registry *prometheus.Registry

	checksMu    sync.Mutex
	readyChecks []readyCheck

	// instance names this run and seq numbers its reports: the watcher orders reports by them,
	// not by the sample time, which this node's clock may have put ahead.
	instance string
	seq      atomic.Uint64

	cpuGauge, memGauge    prometheus.Gauge
	samples, sampleErrors prometheus.Counter
	attempts, reports     *prometheus.CounterVec
	lastReport            prometheus.Gauge
	clamped               prometheus.Counter
	podErrors             *prometheus.CounterVec
}

// New validates cfg and builds the agent (no goroutines yet).
func New(cfg Config) (*Agent, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("node name is required")
	}
	if cfg.WatcherURL == "" || cfg.TokenFile == "" {
		return nil, errors.New("watcher URL and token file are required")
	}
	if cfg.SampleInterval <= 0 || cfg.ReportInterval <= 0 {
		return nil, errors.New("intervals must be positive")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Windows != nil && len(cfg.Windows) != len(load.Windows) {
		return nil, fmt.Errorf("windows: want %d lengths, got %d", len(load.Windows), len(cfg.Windows))
	}
	for i, w := range cfg.Windows {
		if w < cfg.SampleInterval || i > 0 && w < cfg.Windows[i-1] {
			return nil, fmt.Errorf("windows: %v must be at least the sample interval and ascending", cfg.Windows)
		}
	}
	a := &Agent{cfg: cfg, sampler: load.NewSamplerWindows(cfg.ProcRoot, cfg.SampleInterval, cfg.Windows), registry: prometheus.NewRegistry(),
		instance: rand.Text()[:16]}
	nodeLabel := prometheus.Labels{"node": cfg.NodeName}
	a.cpuGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_node_cpu_utilisation_percent",
		Help: "Node CPU utilisation over the last sample interval, percent.", ConstLabels: nodeLabel})
	a.memGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_node_memory_utilisation_percent",
		Help: "Node memory utilisation (1 - MemAvailable/MemTotal), percent.", ConstLabels: nodeLabel})
	a.samples = prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_agent_load_samples_total", Help: "Load samples recorded."})
	a.sampleErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_agent_load_sample_errors_total", Help: "Failed /proc reads."})
	a.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_report_attempts_total",
		Help: "Report push attempts by result (ok, retry, refused)."}, []string{"result"})
	a.reports = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_reports_total",
		Help: "Reports by outcome (pushed, failed, skipped)."}, []string{"outcome"})
	a.lastReport = prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_agent_last_report_timestamp_seconds",
		Help: "Unix time of the last report the watcher accepted."})
	a.clamped = prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_agent_values_clamped_total",
		Help: "Report values outside [0,100] % (or not finite) clamped before pushing."})
	a.podErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_agent_pod_usage_errors_total",
		Help: "Pods left out of a sample's per-pod usage, by reason (gone, garbage, range, too_many)."}, []string{"reason"})
	a.registry.MustRegister(a.cpuGauge, a.memGauge, a.samples, a.sampleErrors, a.attempts, a.reports, a.lastReport, a.clamped, a.podErrors,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	a.sampler.OnSample = func(s load.Sample) {
		a.cpuGauge.Set(s.CPU)
		a.memGauge.Set(s.Memory)
		a.samples.Inc()
	}
	a.sampler.OnError = func(error) { a.sampleErrors.Inc() }
	a.pusher = &report.Pusher{URL: cfg.WatcherURL, TokenFile: cfg.TokenFile, Client: hc,
		InitialBackoff: 500 * time.Millisecond, MaxBackoff: min(10*time.Second, cfg.ReportInterval),
		OnAttempt: func(r string) { a.attempts.WithLabelValues(r).Inc() }}
	a.pods = func() []load.PodRef { return nil }
	a.podsSync = func() bool { return true }
	if cfg.CgroupRoot != "" {
		// Through a.pods at every sample, so the informer set up by Run is what is read.
		a.sampler.SetPods(load.NewCgroups(cfg.CgroupRoot), func() []load.PodRef { return a.pods() }, loadapi.MaxPods,
			func(e *load.PodError) {
				a.podErrors.WithLabelValues(e.Reason).Inc()
				// Gone is the normal end of a pod between the informer's view and the read.
				if e.Reason != load.PodGone {
					klog.V(2).InfoS("Pod usage left out", "pod", e.UID, "reason", e.Reason, "err", e.Err)
				}
			})
	}
	return a, nil
}

type readyCheck struct {
	name  string
	check func() error
}

// AddReadyCheck makes /readyz also depend on check (an optional part such as the PodConfig
// executor): while it returns an error, /readyz answers 503 with the check's name and error.
func (a *Agent) AddReadyCheck(name string, check func() error) {
	a.checksMu.Lock()
	defer a.checksMu.Unlock()
	a.readyChecks = append(a.readyChecks, readyCheck{name: name, check: check})
}

func (a *Agent) failingCheck() error {
	a.checksMu.Lock()
	checks := append([]readyCheck(nil), a.readyChecks...)
	a.checksMu.Unlock()
	for _, c := range checks {
		if err := c.check(); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}

// Handler serves /metrics, /healthz and /readyz.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// Healthy while sampling works: a /proc that cannot be read for 3 intervals needs a restart
		// or an operator, and a liveness probe is the one that should notice.
		if last, ok := a.sampler.Last(); ok && time.Since(last.Time) > 3*a.cfg.SampleInterval+5*time.Second {
			http.Error(w, "no load sample since "+last.Time.Format(time.RFC3339), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		_, sampled := a.sampler.Last()
		failing := a.failingCheck()
		switch {
		case !a.podsSync():
			http.Error(w, "pod informer not synced", http.StatusServiceUnavailable)
		case !sampled:
			http.Error(w, "no load sample yet", http.StatusServiceUnavailable)
		case failing != nil:
			http.Error(w, failing.Error(), http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	return mux
}

// Run starts everything and blocks until ctx is done, then shuts down the HTTP server.
func (a *Agent) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithValues("node", a.cfg.NodeName)
	if a.cfg.Client != nil {
		// Only this node's pods: the agent must neither need nor hold the whole cluster's pods.
		f := informers.NewSharedInformerFactoryWithOptions(a.cfg.Client, 0, informers.WithTweakListOptions(
			func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.cfg.NodeName).String()
			}))
		podInf := f.Core().V1().Pods()
		lister := podInf.Lister()
		inf := podInf.Informer()
		f.Start(ctx.Done())
		a.podsSync = inf.HasSynced
		a.pods = func() []load.PodRef {
			pods, err := lister.List(labels.Everything())
			if err != nil {
				return nil
			}
			refs := make([]load.PodRef, 0, len(pods))
			for _, p := range pods {
				// The node check repeats the field selector so a server (or fake) that ignores it
				// cannot make the agent report another node's pods.
				if p.Spec.NodeName != a.cfg.NodeName || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue // finished pods use no CPU or memory
				}
				refs = append(refs, load.PodRef{UID: string(p.UID), QOS: string(p.Status.QOSClass)})
			}
			return refs
		}
		defer f.Shutdown()
	}

	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	log.Info("Agent load sampling started", "listen", ln.Addr().String(), "procRoot", a.cfg.ProcRoot,
		"watcher", a.cfg.WatcherURL, "sampleInterval", a.cfg.SampleInterval, "reportInterval", a.cfg.ReportInterval)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a.sampler.Run(ctx) }()
	go func() { defer wg.Done(); a.reportLoop(ctx) }()

	select {
	case <-ctx.Done():
	case err = <-srvErr:
		log.Error(err, "HTTP server failed")
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	wg.Wait()
	log.Info("Agent load sampling stopped")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Registry is the agent's metrics registry (/metrics); other agent parts register into it.
func (a *Agent) Registry() *prometheus.Registry { return a.registry }

// Sampler exposes the sampler to tests that drive it directly.
func (a *Agent) Sampler() *load.Sampler { return a.sampler }

func (a *Agent) reportLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.ReportInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.PushOnce(ctx)
	}
}

// PushOnce builds and pushes one report; retries end when the next report is due.
func (a *Agent) PushOnce(ctx context.Context) error {
	log := klog.FromContext(ctx)
	var uids []string // nil without an informer: "not known", not "no pods"
	if refs := a.pods(); refs != nil {
		uids = make([]string, len(refs))
		for i, r := range refs {
			uids[i] = r.UID
		}
		uids = report.SortedUIDs(uids)
	}
	r, clamped, ok := report.BuildCounted(a.cfg.NodeName, a.sampler, time.Now(), uids)
	a.clamped.Add(float64(clamped))
	if !ok {
		a.reports.WithLabelValues("skipped").Inc()
		log.Info("No load sample yet, report skipped", "procRoot", a.cfg.ProcRoot)
		return nil
	}
	r.Instance, r.Seq = a.instance, a.seq.Add(1)
	pctx, cancel := context.WithTimeout(ctx, a.cfg.ReportInterval)
	defer cancel()
	if err := a.pusher.Push(pctx, &r); err != nil {
		a.reports.WithLabelValues("failed").Inc()
		log.Error(err, "Load report not delivered", "node", r.Node)
		return err
	}
	a.reports.WithLabelValues("pushed").Inc()
	a.lastReport.SetToCurrentTime()
	log.V(4).Info("Load report pushed", "node", r.Node, "time", r.Time, "pods", len(r.PodUIDs))
	return nil
}
