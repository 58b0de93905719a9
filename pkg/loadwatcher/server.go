package loadwatcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// NodeChecker tells whether a node exists in the cluster (a node lister in the binary).
type NodeChecker func(name string) bool

// Server serves the load-watcher API from a Store and, for the agent source, accepts reports.
type Server struct {
	Store *Store
	// Auth verifies agent reports; nil disables POST (non-agent sources).
	Auth *Authenticator
	// Reads decides who may GET the documents. nil serves them to anyone: only tests of the
	// document itself leave it unset; the binary always sets one (anonymous only by its flag).
	Reads *ReadAuthorizer
	// NodeExists, if set, refuses reports for nodes the cluster does not have.
	NodeExists NodeChecker
	Limits     Limits
	// Ready reports readiness (caches synced, first poll done); nil means ready.
	Ready func() bool

	now      func() time.Time
	registry *prometheus.Registry
	rejected *prometheus.CounterVec
	// readsRefused counts refused GETs apart from refused reports: the report counter feeds
	// the agents' alerts, and a tenant probing the watcher is not an agent failing.
	readsRefused *prometheus.CounterVec
	accepted     prometheus.Counter
	requests     *prometheus.CounterVec
	latency      prometheus.Histogram
	polls        *prometheus.CounterVec
	builds       prometheus.Counter
	// futureClamped counts reports whose sample time was ahead of the watcher's clock.
	futureClamped prometheus.Counter
	outOfRange    *prometheus.CounterVec
	healthy       atomic.Bool

	docs docCache
}

// NewServer wires the metrics of a server around store.
func NewServer(store *Store) *Server {
	s := &Server{Store: store, now: time.Now, registry: prometheus.NewRegistry()}
	s.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_loadwatcher_reports_rejected_total", Help: "Agent reports refused or ignored, by reason.",
	}, []string{"reason"})
	s.readsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_loadwatcher_reads_refused_total", Help: "GET /watcher requests refused before reading anything, by reason (no_token, invalid_token, forbidden, auth_unavailable).",
	}, []string{"reason"})
	s.accepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "berth_loadwatcher_reports_accepted_total", Help: "Agent reports stored.",
	})
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_loadwatcher_watcher_requests_total", Help: "GET /watcher requests by status code.",
	}, []string{"code"})
	s.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "berth_loadwatcher_watcher_request_duration_seconds", Help: "GET /watcher latency.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	s.builds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "berth_loadwatcher_watcher_documents_encoded_total", Help: "Full /watcher documents encoded (once per store change and variant, not per request).",
	})
	s.futureClamped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "berth_loadwatcher_reports_future_time_total", Help: "Reports stamped ahead of the watcher's clock (within the allowed skew); their time was clamped to now.",
	})
	s.outOfRange = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_loadwatcher_values_out_of_range_total", Help: "Utilisation values a pull source returned outside [0,100] % (clamped) or not finite (dropped), by source.",
	}, []string{"source"})
	s.polls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_loadwatcher_source_polls_total", Help: "Polls of the prometheus or metrics-server source by result.",
	}, []string{"result"})
	nodes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_loadwatcher_nodes_fresh", Help: "Nodes with fresh metrics."},
		func() float64 { f, _, _ := store.Counts(s.now()); return float64(f) })
	stale := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_loadwatcher_nodes_stale", Help: "Nodes whose metrics are older than the staleness limit."},
		func() float64 { _, st, _ := store.Counts(s.now()); return float64(st) })
	missing := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_loadwatcher_nodes_missing", Help: "Cluster nodes without any metrics."},
		func() float64 { _, _, m := store.Counts(s.now()); return float64(m) })
	s.registry.MustRegister(s.rejected, s.readsRefused, s.accepted, s.requests, s.latency, s.polls, s.builds, s.futureClamped, s.outOfRange, nodes, stale, missing,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	s.healthy.Store(true)
	return s
}

// SetClock replaces time.Now (tests).
func (s *Server) SetClock(now func() time.Time) { s.now = now }

// Registry is the server's metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Rejected is the rejected-reports counter (tests read it).
func (s *Server) Rejected() *prometheus.CounterVec { return s.rejected }

// ReadsRefused is the refused-reads counter (tests read it).
func (s *Server) ReadsRefused() *prometheus.CounterVec { return s.readsRefused }

// Handler is the complete HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ReportPath, s.serveWatcher)
	mux.HandleFunc("GET "+ReportPath+"/{node}", s.serveWatcher)
	mux.HandleFunc("POST "+ReportPath, s.serveReport)
	mux.HandleFunc(ReportPath+"/{node}", func(w http.ResponseWriter, r *http.Request) {
		s.reject(w, http.StatusMethodNotAllowed, ReasonMethod, r.Method+" "+r.URL.Path)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if !s.healthy.Load() {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.Ready != nil && !s.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	return mux
}

func (s *Server) serveWatcher(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code := s.writeWatcher(w, r)
	s.requests.WithLabelValues(strconv.Itoa(code)).Inc()
	s.latency.Observe(time.Since(start).Seconds())
}

func (s *Server) writeWatcher(w http.ResponseWriter, r *http.Request) int {
	q := r.URL.Query()
	if s.Reads != nil {
		// A pods value that does not parse is checked as a pod-list read: the caller learns
		// nothing about its syntax before it is allowed the stricter permission.
		pods, perr := strconv.ParseBool(q.Get(PodsQuery))
		if err := s.Reads.AuthorizeRead(r.Context(), r, pods || (perr != nil && q.Get(PodsQuery) != "")); err != nil {
			return s.refuseRead(w, r, err)
		}
	}
	query := Query{Window: q.Get("window"), Node: r.PathValue("node")}
	if query.Node == "" {
		// Upstream load-watcher's per-host form.
		query.Node = q.Get("host")
	}
	if v := q.Get(PodsQuery); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			http.Error(w, "pods: want true or false", http.StatusBadRequest)
			return http.StatusBadRequest
		}
		query.Pods = b
	}
	switch query.Window {
	case "", "5m", "10m", "15m":
	default:
		http.Error(w, "window: want 5m, 10m or 15m", http.StatusBadRequest)
		return http.StatusBadRequest
	}
	query.Typed = acceptsLoad(r.Header.Get("Accept"))
	var doc *doc
	var err error
	if query.Node == "" {
		doc = s.docs.get(s, query, s.now())
	} else {
		// One node: small, and cheap enough to build per request.
		doc, err = s.nodeDoc(query)
		if err == errUnknownNode {
			http.Error(w, "unknown node", http.StatusNotFound)
			return http.StatusNotFound
		}
	}
	if err != nil {
		klog.ErrorS(err, "Encoding /watcher response failed")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return http.StatusInternalServerError
	}
	return doc.serve(w, r)
}

var errUnknownNode = errors.New("unknown node")

// nodeDoc encodes the document of one node in the form q asks for.
func (s *Server) nodeDoc(q Query) (*doc, error) {
	if q.Typed {
		b := s.Store.BuildLoad(q, s.now())
		if !b.Found {
			return nil, errUnknownNode
		}
		return encodeLoad(&b)
	}
	b := s.Store.Build(q, s.now())
	if !b.Found {
		return nil, errUnknownNode
	}
	return encodeDoc(&b.Response)
}

// refuseRead answers a refused read with its status and reason, and counts it.
func (s *Server) refuseRead(w http.ResponseWriter, r *http.Request, err error) int {
	log := klog.FromContext(r.Context()).WithValues("remote", r.RemoteAddr, "path", r.URL.Path)
	ae, ok := err.(*AuthError)
	if !ok {
		ae = &AuthError{Status: http.StatusInternalServerError, Reason: "internal", Msg: err.Error()}
	}
	if ae.Status == http.StatusServiceUnavailable {
		log.Error(err, "Read not checked: API server unavailable")
	} else {
		log.V(2).Info("Read refused", "reason", ae.Reason, "detail", ae.Msg)
	}
	s.readsRefused.WithLabelValues(ae.Reason).Inc()
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="berth-loadwatcher"`)
	}
	http.Error(w, ae.Reason+": "+truncate(ae.Msg, 512), ae.Status)
	return ae.Status
}

func (s *Server) reject(w http.ResponseWriter, status int, reason, msg string) {
	s.rejected.WithLabelValues(reason).Inc()
	// Messages may quote the caller's input: bounded, whatever it sent.
	http.Error(w, reason+": "+truncate(msg, 512), status)
}

func (s *Server) serveReport(w http.ResponseWriter, r *http.Request) {
	if s.Auth == nil {
		s.reject(w, http.StatusMethodNotAllowed, ReasonMethod, "this watcher does not accept reports (source is not agent)")
		return
	}
	ctx := r.Context()
	log := klog.FromContext(ctx).WithValues("remote", r.RemoteAddr)
	token, ok := BearerToken(r)
	if !ok {
		log.Info("Report refused", "reason", ReasonNoToken)
		s.reject(w, http.StatusUnauthorized, ReasonNoToken, "missing bearer token")
		return
	}
	// Authenticate before reading the body, so unauthenticated callers cannot make us parse.
	id, err := s.Auth.Authenticate(ctx, token)
	if err != nil {
		s.refuse(w, log, err)
		return
	}
	log = log.WithValues("serviceAccount", id.Namespace+"/"+id.ServiceAccount, "pod", id.PodName)
	body := http.MaxBytesReader(w, r.Body, MaxReportBytes)
	rep, err := DecodeReport(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			log.Info("Report refused", "reason", ReasonTooLarge, "limit", MaxReportBytes)
			s.reject(w, http.StatusRequestEntityTooLarge, ReasonTooLarge, fmt.Sprintf("body over %d bytes", MaxReportBytes))
			return
		}
		log.Info("Report refused", "reason", ReasonBadJSON, "err", truncate(err.Error(), 512))
		s.reject(w, http.StatusBadRequest, ReasonBadJSON, err.Error())
		return
	}
	now := s.now()
	if err := ValidateReport(rep, now, s.Limits); err != nil {
		s.refuse(w, log.WithValues("node", truncate(rep.Node, 80)), err)
		return
	}
	log = log.WithValues("node", rep.Node)
	if err := s.Auth.Authorize(ctx, id, rep.Node); err != nil {
		s.refuse(w, log, err)
		return
	}
	if s.NodeExists != nil && !s.NodeExists(rep.Node) {
		log.Info("Report refused", "reason", ReasonUnknownNode)
		s.reject(w, http.StatusBadRequest, ReasonUnknownNode, fmt.Sprintf("node %q is not in the cluster", rep.Node))
		return
	}
	// A sample time ahead of the watcher's clock (within the allowed skew) is clamped to now:
	// it is served as fresh, never as fresher than anything that can follow it.
	updated := time.Unix(rep.Time, 0)
	if updated.After(now) {
		s.futureClamped.Inc()
		log.V(2).Info("Report time ahead of the watcher's clock, clamped to now", "time", rep.Time, "ahead", updated.Sub(now))
		updated = now
	}
	l := NodeLoad{Updated: updated, Windows: WindowsFromReport(rep), PodUIDs: rep.PodUIDs, Pods: rep.Pods, Instance: rep.Instance, Seq: rep.Seq}
	if !s.Store.Put(rep.Node, l) {
		// Not an error of the agent's (a retried report arrived after a newer one): accept, ignore.
		log.V(2).Info("Report ignored: not newer than the stored one of the same agent", "instance", rep.Instance, "seq", rep.Seq)
		s.rejected.WithLabelValues(ReasonOutOfOrder).Inc()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.accepted.Inc()
	log.V(4).Info("Report stored", "time", rep.Time, "pods", len(rep.PodUIDs))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) refuse(w http.ResponseWriter, log klog.Logger, err error) {
	var ae *AuthError
	var ve *ValidationError
	switch {
	case errors.As(err, &ae):
		if ae.Status == http.StatusServiceUnavailable {
			log.Error(err, "Report not checked: API server unavailable")
		} else {
			log.Info("Report refused", "reason", ae.Reason, "detail", ae.Msg)
		}
		s.reject(w, ae.Status, ae.Reason, ae.Msg)
	case errors.As(err, &ve):
		log.Info("Report refused", "reason", ve.Reason, "detail", ve.Msg)
		s.reject(w, http.StatusBadRequest, ve.Reason, ve.Msg)
	default:
		log.Error(err, "Report refused")
		s.reject(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// Poller is a pull source (prometheus, metrics-server): each Poll returns the nodes it has
// numbers for, with the time of their newest sample.
type Poller interface {
	Poll(ctx context.Context, now time.Time) (map[string]NodeLoad, error)
}

// RunPoller polls p every interval until ctx is done, storing what it returns. A node missing
// from a poll keeps its last entry, which ages into "stale": a failing source never turns into
// "zero load". firstDone is closed after the first poll completes (successfully or not).
func (s *Server) RunPoller(ctx context.Context, p Poller, interval time.Duration, firstDone chan<- struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.PollOnce(ctx, p)
		if firstDone != nil {
			close(firstDone)
			firstDone = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PollOnce runs one poll and stores its result.
func (s *Server) PollOnce(ctx context.Context, p Poller) error {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	loads, err := p.Poll(pctx, s.now())
	if err != nil {
		s.polls.WithLabelValues("error").Inc()
		klog.ErrorS(err, "Polling the load source failed; keeping the previous numbers until they go stale")
		return err
	}
	s.polls.WithLabelValues("ok").Inc()
	for node, l := range loads {
		if s.NodeExists != nil && !s.NodeExists(node) {
			s.rejected.WithLabelValues(ReasonUnknownNode).Inc()
			klog.V(2).InfoS("Ignoring load of a node not in the cluster", "node", node)
			continue
		}
		if n := ClampLoad(&l); n > 0 {
			s.outOfRange.WithLabelValues(s.Store.source).Add(float64(n))
			klog.V(2).InfoS("Load source returned utilisation outside [0,100] %; clamped", "node", node, "values", n)
		}
		s.Store.Put(node, l)
	}
	return nil
}

// ClampLoad keeps every utilisation of l within [0,100] % (a percentage of capacity cannot be
// anything else, and scores computed from one outside it leave their range) and drops values
// that are not finite. It returns how many values it changed or dropped.
func ClampLoad(l *NodeLoad) int {
	n := 0
	for w, wl := range l.Windows {
		n += wl.CPU.clamp() + wl.Memory.clamp()
		l.Windows[w] = wl
	}
	return n
}
